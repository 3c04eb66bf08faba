// Nothing of its own: the target that precompiles LibTorch's headers (CMakeLists.txt, KFORGE_PCH).
