// Placeholder: filled by issue 34 work.
#include <gtest/gtest.h>
