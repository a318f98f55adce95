"""Will the torch build the job runs have kernels for the target GPU?

A torch wheel carries machine code (``sm_XY`` cubins) for the architectures it was built for,
and maybe PTX (``compute_XY``) the driver can compile at load time. A cubin for ``sm_XY`` runs
on a GPU of compute capability ``X.Z`` with ``Z >= Y`` (same major version); PTX for
``compute_XY`` runs on any GPU of capability ``>= X.Y``. Anything else reports CUDA available
and then dies at the first kernel with "no kernel image is available for execution on the
device".

The arch list comes from the installed torch (``torch.cuda.get_arch_list()``, imported only
here and only when the plan does not pin a version) or from :data:`KNOWN_BUILDS`, a table of
official wheels. Each row says how it is known: ``recorded`` (``get_arch_list()`` output quoted
from a real install), ``build-script`` (``TORCH_CUDA_ARCH_LIST`` of PyTorch's release build
script, quoted in a public thread) or ``inferred`` (from the same CUDA line of a neighbouring
release; check it with ``python -c "import torch; print(torch.cuda.get_arch_list())"``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpucost._optional import optional

_LEGACY = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
_CU117 = ("sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86")
_CU128_V = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
_CU128_T = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
_CU130 = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120")

_I182250 = ("github.com/pytorch/pytorch/issues/182250 (get_arch_list() of download.pytorch.org "
            "wheels)")
_I167244 = "github.com/pytorch/pytorch/issues/167244 (torch's own warning: 2.7.0.dev20250310+cu124)"
_A17296 = ("github.com/AUTOMATIC1111/stable-diffusion-webui/issues/17296 (build_cuda.sh "
           "TORCH_CUDA_ARCH_LIST)")
_W653 = "github.com/jhj0517/Whisper-WebUI/issues/653 (build_cuda.sh TORCH_CUDA_ARCH_LIST)"
_C16438 = "github.com/Comfy-Org/ComfyUI/pull/16438 (build_cuda.sh TORCH_CUDA_ARCH_LIST)"
_LINE = "same CUDA line as the neighbouring releases in this table"  # shown after "inferred: "


@dataclass(frozen=True)
class BuildArchs:
    """The architectures one official torch wheel was compiled for, and how that is known."""

    version: str  # "2.5.1+cu124": release (major.minor) + CUDA line
    archs: tuple[str, ...]
    basis: str  # recorded | build-script | inferred | installed
    source: str


def _row(version: str, archs: tuple[str, ...], basis: str, source: str) -> BuildArchs:
    return BuildArchs(version, archs, basis, source)


# Keyed by "major.minor+cuNNN": patch releases of one minor version share the build script.
KNOWN_BUILDS: dict[str, BuildArchs] = {b.version: b for b in (
    _row("2.0+cu117", _CU117, "inferred", "torch 2.0 release build matrix; sm_37 still built"),
    _row("2.0+cu118", (*_CU117, "sm_90"), "inferred",
         "github.com/pytorch/pytorch/issues/95648 quotes this list from a cu118 build of "
         "2023-02 without naming the release"),
    _row("2.1+cu118", _LEGACY, "inferred", _LINE),
    _row("2.1+cu121", _LEGACY, "build-script", _A17296),
    _row("2.2+cu118", _LEGACY, "inferred", _LINE),
    _row("2.2+cu121", _LEGACY, "inferred", _LINE),
    _row("2.3+cu118", _LEGACY, "inferred", _LINE),
    _row("2.3+cu121", _LEGACY, "inferred", _LINE),
    _row("2.4+cu118", _LEGACY, "inferred", _LINE),
    _row("2.4+cu121", _LEGACY, "inferred", _LINE),
    _row("2.4+cu124", _LEGACY, "inferred", _LINE),
    _row("2.5+cu118", _LEGACY, "inferred", _LINE),
    _row("2.5+cu121", _LEGACY, "inferred", _LINE),
    _row("2.5+cu124", _LEGACY, "inferred", _LINE),
    _row("2.6+cu118", _LEGACY, "inferred", _LINE),
    _row("2.6+cu124", _LEGACY, "inferred", _LINE),
    _row("2.6+cu126", _LEGACY, "inferred", _LINE),
    _row("2.7+cu118", _LEGACY, "inferred", _LINE),
    _row("2.7+cu124", _LEGACY, "recorded", _I167244),
    _row("2.7+cu126", _LEGACY, "inferred", _LINE),
    _row("2.7+cu128", (*_CU128_T, "compute_120"), "build-script", _A17296),
    _row("2.8+cu126", _LEGACY, "build-script", _W653),
    _row("2.8+cu128", _CU128_V, "build-script", _W653),
    _row("2.8+cu129", _CU128_V, "inferred", _LINE),
    _row("2.9+cu126", _LEGACY, "build-script", _C16438),
    _row("2.9+cu128", _CU128_V, "build-script", _C16438),
    _row("2.9+cu130", _CU130, "build-script", _C16438),
    _row("2.10+cu126", _LEGACY, "inferred", _LINE),
    _row("2.10+cu128", _CU128_V, "recorded", _I182250),
    _row("2.10+cu130", _CU130, "inferred", _LINE),
    _row("2.11+cu126", _LEGACY, "recorded", _I182250),
    _row("2.11+cu128", _CU128_T, "recorded", _I182250),
    _row("2.11+cu130", _CU130, "inferred", _LINE),
)}

# The CUDA line `pip install torch==X.Y.Z` gets from PyPI on Linux (no +cuNNN suffix).
# Inferred from the release notes of each version; pin "+cuNNN" to make it explicit.
PYPI_DEFAULT_CUDA: dict[str, str] = {
    "2.0": "cu117", "2.1": "cu121", "2.2": "cu121", "2.3": "cu121", "2.4": "cu121",
    "2.5": "cu124", "2.6": "cu124", "2.7": "cu126", "2.8": "cu128", "2.9": "cu128",
    "2.10": "cu128", "2.11": "cu130",
}

_VERSION = re.compile(r"^\s*(?:torch\s*==\s*)?(\d+)\.(\d+)[^+\s]*(?:\+([\w.]+))?\s*$")
_ARCH = re.compile(r"^(sm|compute)_(\d+)([af]?)$")


@dataclass(frozen=True)
class ArchVerdict:
    ok: bool | None  # None: could not tell
    message: str
    via: str | None = None  # the arch entry that serves the GPU (sm_86, compute_120)


def parse_torch_version(text: str) -> tuple[str, str | None]:
    """``"torch==2.5.1+cu124"`` -> ``("2.5", "cu124")``; the CUDA line is None when absent."""
    m = _VERSION.match(text)
    if m is None:
        raise ValueError(f"not a torch version: {text!r}")
    return f"{m.group(1)}.{m.group(2)}", m.group(3)


def pinned_build(text: str) -> BuildArchs | None:
    """The arch list of the official wheel a pinned version installs, None when unknown."""
    minor, local = parse_torch_version(text)
    if local is not None and not local.startswith("cu"):
        return None  # +cpu or +rocmX.Y: no CUDA kernels to compare
    cuda = local or PYPI_DEFAULT_CUDA.get(minor)
    if cuda is None:
        return None
    return KNOWN_BUILDS.get(f"{minor}+{cuda}")


def installed_build() -> BuildArchs | None:
    """The arch list of the torch installed here; None when torch is not installed."""
    torch = optional("torch")
    if torch is None:
        return None
    return BuildArchs(str(torch.__version__), tuple(torch.cuda.get_arch_list()), "installed",
                      "torch.cuda.get_arch_list() of the installed torch")


def _cc_number(compute_capability: str) -> int:
    major, _, minor = compute_capability.partition(".")
    return int(major) * 10 + int(minor or 0)


def runs_on(archs: tuple[str, ...], compute_capability: str) -> ArchVerdict:
    """Does a build with ``archs`` have code a GPU of ``compute_capability`` ("8.9") can run?"""
    target = _cc_number(compute_capability)
    t_major, t_minor = divmod(target, 10)
    cubins = []
    for entry in archs:
        m = _ARCH.match(entry)
        if m is None or m.group(1) != "sm":
            continue
        major, minor = divmod(int(m.group(2)), 10)
        # "a"/"f" cubins use architecture-specific features; an "a" cubin runs on that exact
        # capability only, an "f" cubin on its family (same major, minor >=).
        if major == t_major and (minor == t_minor if m.group(3) == "a" else minor <= t_minor):
            cubins.append((minor, entry))
    if cubins:
        best = max(cubins)[1]  # the driver loads the closest cubin
        return ArchVerdict(True, f"has {best} code for compute capability {compute_capability}",
                           best)
    for entry in archs:
        m = _ARCH.match(entry)
        if m is not None and m.group(1) == "compute" and int(m.group(2)) <= target:
            return ArchVerdict(True, f"no sm_{target} cubin, but PTX {entry} is JIT-compiled "
                               "at first use (slow start, then fine)", entry)
    listed = " ".join(archs) if archs else "none"
    return ArchVerdict(False, f"has no kernels for compute capability {compute_capability} "
                       f"(sm_{target}); it was built for: {listed}")


def builds_for(compute_capability: str) -> tuple[str, ...]:
    """Known official builds (major.minor+cuNNN) that run on a GPU, newest first."""
    good = [key for key, b in KNOWN_BUILDS.items() if runs_on(b.archs, compute_capability).ok]
    return tuple(sorted(good, key=_build_order, reverse=True))


def _build_order(key: str) -> tuple[int, int, int]:
    minor, _, cuda = key.partition("+")
    a, b = minor.split(".")
    return int(a), int(b), int(cuda[2:])
