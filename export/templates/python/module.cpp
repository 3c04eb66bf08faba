// The extension module <package>._C that `import <package>` loads; setup.py builds it (CMake builds
// no Python module). Loading the shared library runs the TORCH_LIBRARY registrations of torch/*.cpp,
// which is all it is for: the module itself is empty, but Python needs its PyInit function.
#include <Python.h>

PyMODINIT_FUNC PyInit__C(void) {
  static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", "kforge's exported ops (torch.ops.<package>)", -1,
                               nullptr, nullptr, nullptr, nullptr, nullptr};
  return PyModule_Create(&module);
}
