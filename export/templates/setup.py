"""Builds the Python package of a kforge export: the extension NS._C (the plain C++ library from
src/ and its PyTorch ops from torch/) and the package python/NS. NS is manifest.json's "name".

    pip install --no-build-isolation DIR     # DIR: this directory

--no-build-isolation builds against the torch already installed: the ops must be built against the
torch that loads them. Needs the CUDA toolkit's headers (cuda.h) and the driver library (libcuda);
set CUDA_HOME when they are not in /usr/local/cuda or beside the nvcc on PATH.
"""
import glob
import json
import os
import re
import shutil
import sys

from setuptools import setup

try:
    import torch
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError:
    sys.exit("this package builds against PyTorch, which this Python does not have: install torch "
             "first, then: pip install --no-build-isolation " + os.path.dirname(os.path.abspath(__file__)))

HERE = os.path.dirname(os.path.abspath(__file__))

with open(os.path.join(HERE, "manifest.json")) as f:
    manifest = json.load(f)
NAME = manifest["name"]


def cuda_root():
    """The CUDA toolkit whose include/ has cuda.h: $CUDA_HOME, /usr/local/cuda, or nvcc's."""
    tried = []
    candidates = []
    if os.environ.get("CUDA_HOME"):
        candidates.append(os.environ["CUDA_HOME"])
    candidates.append("/usr/local/cuda")
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    for root in candidates:
        header = os.path.join(root, "include", "cuda.h")
        if os.path.exists(header):
            return root
        tried.append(header)
    sys.exit(f"building {NAME} needs the CUDA driver API header cuda.h, not found at: "
             + ", ".join(tried) + (" (no nvcc on PATH)" if not nvcc else "")
             + ". Install the CUDA toolkit or set CUDA_HOME to it.")


def cxx_standard():
    """C++17, the package's own standard, unless this torch's headers need C++20 (2.12 and later)."""
    major, minor = (int(part) for part in re.match(r"(\d+)\.(\d+)", torch.__version__).groups())
    return "-std=c++20" if (major, minor) >= (2, 12) else "-std=c++17"


def relative(pattern):
    return sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, pattern)))


CUDA = cuda_root()
sources = relative("src/*.cpp") + relative("torch/*.cpp") + relative("python/module.cpp")
if not sources:
    sys.exit(f"no sources in {HERE}/src or {HERE}/torch: is this a kforge export?")

extension = CppExtension(
    name=f"{NAME}._C",
    sources=sources,
    include_dirs=[os.path.join(HERE, "include"), os.path.join(HERE, "src"), os.path.join(CUDA, "include")],
    library_dirs=[d for d in (os.path.join(CUDA, "lib64"), os.path.join(CUDA, "lib64", "stubs"))
                  if os.path.isdir(d)],
    # libcuda for the kernels' launches; c10_cuda for the current stream and the device guard
    # (CppExtension links only torch's CPU libraries).
    libraries=["cuda", "c10_cuda"],
    # The kernel images are assembled in from images/ (.incbin in src/*_images.cpp).
    define_macros=[("NS_WITH_TORCH", "1"), ("NS_IMAGES_DIR", '"' + os.path.join(HERE, "images") + '"')],
    extra_compile_args=["-O2", cxx_standard()],
)


def version():
    """The export's date as a version, e.g. 2026.12.4 (0.0.0 when the manifest has none)."""
    date = manifest.get("exported_at", "")[:10].split("-")
    if len(date) == 3 and all(part.isdigit() for part in date):
        return ".".join(str(int(part)) for part in date)
    return "0.0.0"


setup(
    name=NAME,
    version=version(),
    description=f"Kernels exported by kforge: {len(manifest['ops'])} PyTorch op(s)",
    packages=[NAME],
    package_dir={NAME: os.path.join("python", NAME)},
    package_data={NAME: ["manifest.json"]},
    ext_modules=[extension],
    cmdclass={"build_ext": BuildExtension},
    zip_safe=False,
)
