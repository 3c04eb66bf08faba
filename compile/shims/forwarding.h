// kforge: this C/C++ library header is a shim; kforge_shims.h (pre-included) already provides
// what NVRTC can offer of it.
#pragma once
