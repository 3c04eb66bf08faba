// kforge: <cuda.h> for candidates, which NVRTC cannot compile (it is the host's driver API). A
// kernel gets what it needs of it: the tensor map type a TMA kernel takes by value, declared as
// `const __grid_constant__ CUtensorMap map` (docs/answer-format.md, tensor maps).
#pragma once
typedef struct CUtensorMap_st {
  alignas(64) unsigned long long opaque[16];
} CUtensorMap;
