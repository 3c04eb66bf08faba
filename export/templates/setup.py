"""Builds the Python package of a kforge export: the package python/NS and, inside it as NS/_C*.so,
the PyTorch ops' library libNS_torch.so, built by this directory's own CMakeLists.txt (the same build
as `cmake -S DIR`); `import NS` loads it with torch.ops.load_library. NS is manifest.json's "name".

    pip install --no-build-isolation DIR     # DIR: this directory

--no-build-isolation builds against the torch already installed: the ops must be built against the
torch that loads them. Needs CMake, a C++17 compiler and the CUDA toolkit (cuda.h, libcuda); set
CUDA_HOME or CUDAToolkit_ROOT when CMake does not find it. CMAKE_ARGS passes more options to CMake.

Why CMake and not torch.utils.cpp_extension: one build of the ops, the one the C++ tests check. A
setuptools build links with the Python interpreter's own flags, and a build of these ops that way
crashed in std::ostream inside the extension on the machine kforge tests on (docs/export.md).
"""
import json
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:
    import torch
except ImportError:
    sys.exit("this package builds against PyTorch, which this Python does not have: install torch "
             "first, then: pip install --no-build-isolation " + os.path.dirname(os.path.abspath(__file__)))

HERE = os.path.dirname(os.path.abspath(__file__))

with open(os.path.join(HERE, "manifest.json")) as f:
    manifest = json.load(f)
NAME = manifest["name"]
LIBRARY = f"lib{NAME}_torch.so"


class CMakeBuild(build_ext):
    """Builds libNS_torch.so with CMake against this torch and puts it into the package as NS/_C*.so."""

    def build_extension(self, ext):
        cmake = shutil.which("cmake")
        if cmake is None:
            sys.exit(f"building {NAME} needs CMake (3.18 or later) on PATH")
        build = os.path.join(os.path.abspath(self.build_temp), NAME)
        args = [cmake, "-S", HERE, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}", f"-D{NAME}_BUILD_TESTS=OFF"]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        if os.environ.get("CUDA_HOME"):
            args.append(f"-DCUDAToolkit_ROOT={os.environ['CUDA_HOME']}")
        args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        jobs = os.environ.get("MAX_JOBS") or str(os.cpu_count() or 1)
        self.run_command_line(args)
        with open(os.path.join(build, "CMakeCache.txt")) as cache:
            if f"{NAME}_BUILD_TORCH:BOOL=ON" not in cache.read():
                sys.exit(f"{NAME}'s PyTorch ops need a PyTorch built with CUDA; this one is torch "
                         f"{torch.__version__} (CUDA {torch.version.cuda}), found by CMake without c10_cuda")
        self.run_command_line([cmake, "--build", build, "--target", f"{NAME}_torch", "-j", jobs])
        target = self.get_ext_fullpath(ext.name)  # NS/_C.<python's suffix>: setuptools installs it
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(build, LIBRARY), target)

    @staticmethod
    def run_command_line(command):
        print(" ".join(shlex.quote(a) for a in command), flush=True)
        if subprocess.call(command) != 0:
            sys.exit(f"building {NAME} failed in: {' '.join(command[:3])} (see above)")


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
    # No sources: CMakeBuild puts libNS_torch.so in its place (the package loads it by path).
    ext_modules=[Extension(f"{NAME}._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
