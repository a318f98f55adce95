"""Turn the GPU names real sources use into the catalog's canonical names.

NVML says "NVIDIA A100-SXM4-80GB" or "H100 80GB HBM3", clouds say "A100-80GB", "nvidia-tesla-a100",
"RTX4090" or "gpu_8x_h100_sxm5". A name is split into tokens (any non-alphanumeric run separates)
and each token is read as one of:

* noise: vendor and brand words (NVIDIA, GeForce, Tesla, Quadro, AMD, Instinct), memory types
  (HBM3, GDDR6X), counts ("8x"), "gpu", "Generation", "Edition", "Blackwell";
* a memory size: "80GB", "144G", "32GiB", "40 GB";
* a form factor: SXM/SXM2..SXM6, HGX, NVLink and MEGA (all SXM boards), PCIe, NVL, OAM;
* otherwise part of the model key; the model tokens are joined: "RTX 4090" == "RTX4090".

The model key selects a family of rows (a row's canonical name and each alias contribute one).
A form factor or memory size in the name must match (memory within 10%, so GiB and "192GB" vs
180 GB both match); what is left unsaid falls back to the family's DEFAULT, the variant a cloud
most often means by the bare name: among the candidates left, the one with the default's form
factor, then the memory closest to the default's. So "A100" is an A100 SXM4 40GB, "A100 80GB" an
A100 SXM4 80GB, "V100 PCIe" a V100 PCIe 16GB. Lambda's "RTX6000" (24 GB) is the Quadro RTX 6000;
the Ada card is always spelled with "Ada". Laptop parts ("Max-Q", "Laptop") are not in the
catalog and do not resolve to their desktop namesakes.

A filter (``--gpu`` in compare and plan, the API's ``gpu=``) takes every variant a name can mean
(:func:`match_gpu_names`): a catalog name exactly as the catalog spells it is that one GPU;
any other name is its family narrowed by the form factor and memory it states, so "A100" is all
four A100s, "A100 80GB" both 80 GB cards and "H100" the PCIe, SXM5 and NVL cards. A family
includes its Ada generation: "RTX 6000" is the Quadro RTX 6000 and the RTX 6000 Ada (not the
Blackwell "RTX PRO 6000", another line). Where one GPU must be chosen (`predict`, `scale`), the
family default above is taken and :func:`variant_note` says so.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from dataclasses import dataclass

from gpucost.catalog.spec import GpuSpec
from gpucost.catalog.table import entries, entries_by_name
from gpucost.errors import UnknownGpuError

# family model key -> the variant a bare family name means (see the module docstring)
FAMILY_DEFAULTS: dict[str, str] = {
    "a100": "A100 SXM4 40GB",  # AWS p4d, GCP a2-highgpu
    "a800": "A800 SXM4 80GB",
    "v100": "V100 SXM2 16GB",  # AWS p3, GCP n1 + V100, Lambda gpu_8x_v100
    "p100": "P100 PCIe 16GB",  # GCP's P100
    "h100": "H100 SXM5 80GB",  # AWS p5, GCP a3, Lambda/Nebius H100 SXM
    "h200": "H200 SXM 141GB",
    "gh200": "GH200 96GB",  # Lambda's GH200
    "rtx4060ti": "RTX 4060 Ti 8GB",  # the original; the 16 GB card came later
}

_NOISE = frozenset({
    "nvidia", "geforce", "tesla", "quadro", "amd", "instinct", "gpu", "generation", "edition",
    "blackwell", "hbm2", "hbm2e", "hbm3", "hbm3e", "gddr5", "gddr5x", "gddr6", "gddr6x", "gddr7",
    "secure", "community", "vws",  # GCP's virtual-workstation SKUs are the same GPUs
})
_FORM_TOKENS: dict[str, str] = {
    **{f"sxm{n}": "sxm" for n in ("", "2", "3", "4", "5", "6")},
    "hgx": "sxm", "nvlink": "sxm", "mega": "sxm",
    "pcie": "pcie", "pci": "pcie", "nvl": "nvl", "oam": "oam",
}
_NON_GPU_PREFIXES = (
    "tpu", "inferentia", "trainium", "trn1", "trn2", "inf1", "inf2", "gaudi", "habana", "hl205",
    "virtex", "ultrascale", "fpga", "vu9p", "vu47p",
)
_SEPARATORS = re.compile(r"[^a-z0-9.]+")
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)(?:gb|g|gib)$")
_COUNT = re.compile(r"^\d+x$")
_NUMBER = re.compile(r"^\d+$")
_UNITS = frozenset({"gb", "gib"})
_MEMORY_TOLERANCE = 0.10  # relative; covers GiB-vs-GB and "B200 192GB" vs the 180 GB sold
_GENERATION_SUFFIX = "ada"  # "RTX 6000 Ada" is a variant of the "RTX 6000" a filter names


@dataclass(frozen=True, slots=True)
class _Parsed:
    model: str
    form: str | None
    memory_gb: float | None
    non_gpu: bool


def _parse(name: str) -> _Parsed:
    model: list[str] = []
    form: str | None = None
    memory_gb: float | None = None
    non_gpu = False
    # "." separates too, except inside a memory size such as "1.5GB"
    for raw in _SEPARATORS.split(name.casefold()):
        if (size := _MEMORY.match(raw)) is not None:
            memory_gb = float(size.group(1))
            continue
        for token in raw.split("."):
            if not token or token in _NOISE or _COUNT.match(token):
                continue
            if token.startswith(_NON_GPU_PREFIXES):
                non_gpu = True
            if (size := _MEMORY.match(token)) is not None:
                memory_gb = float(size.group(1))
            elif token in _UNITS and model and _NUMBER.match(model[-1]):
                memory_gb = float(model.pop())  # "A100 (40 GB SXM4)"
            elif token in _FORM_TOKENS:
                form = _FORM_TOKENS[token]
            else:
                model.append(token)
    return _Parsed("".join(model), form, memory_gb, non_gpu)


def _form_class(form_factor: str) -> str:
    lowered = form_factor.casefold()
    return "sxm" if lowered.startswith("sxm") else lowered


@dataclass(frozen=True, slots=True)
class _Index:
    exact: dict[tuple[str, str | None, float | None], str]
    families: dict[str, tuple[str, ...]]
    suggestion_keys: dict[str, str]  # lowercase spelling -> canonical name


@functools.cache
def _index() -> _Index:
    exact: dict[tuple[str, str | None, float | None], str] = {}
    families: dict[str, list[str]] = {}
    suggestion_keys: dict[str, str] = {}
    for entry in entries():
        canonical = entry.spec.name
        for spelling in (canonical, *entry.spec.aliases):
            parsed = _parse(spelling)
            key = (parsed.model, parsed.form, parsed.memory_gb)
            if exact.setdefault(key, canonical) != canonical:
                raise RuntimeError(f"GPU catalog: {spelling!r} names both {exact[key]!r} and "
                                   f"{canonical!r}")
            members = families.setdefault(parsed.model, [])
            if canonical not in members:
                members.append(canonical)
            suggestion_keys.setdefault(spelling.casefold(), canonical)
            suggestion_keys.setdefault(parsed.model, FAMILY_DEFAULTS.get(parsed.model, canonical))
    for model, members in families.items():
        if len(members) > 1 and model not in FAMILY_DEFAULTS:
            raise RuntimeError(f"GPU catalog: family {model!r} ({members}) has no default")
    return _Index(exact, {m: tuple(v) for m, v in families.items()}, suggestion_keys)


def _memory_matches(spec_memory_gb: float, memory_gb: float) -> bool:
    return abs(spec_memory_gb - memory_gb) <= _MEMORY_TOLERANCE * spec_memory_gb


def _lookup(parsed: _Parsed, memory_hint_gb: float | None) -> str | None:
    if parsed.non_gpu or not parsed.model:
        return None
    index = _index()
    hit = index.exact.get((parsed.model, parsed.form, parsed.memory_gb))
    if hit is not None and (memory_hint_gb is None or parsed.memory_gb is not None):
        return hit  # a memory size in the name wins over the hint
    candidates = _family(parsed.model)
    if parsed.form is not None:
        candidates = [s for s in candidates if _form_class(s.form_factor) == parsed.form]
    if parsed.memory_gb is not None:
        candidates = [s for s in candidates if _memory_matches(s.memory_gb, parsed.memory_gb)]
    elif memory_hint_gb is not None:
        # a hint only chooses between variants; it never rejects a name
        matching = [s for s in candidates if _memory_matches(s.memory_gb, memory_hint_gb)]
        candidates = matching or candidates
    if hit is not None and any(s.name == hit for s in candidates):
        return hit
    if not candidates:
        return None
    return _ranked(candidates, parsed.model)[0].name


def _family(model: str) -> list[GpuSpec]:
    specs = entries_by_name()
    return [specs[name].spec for name in _index().families.get(model, ())]


def _ranked(candidates: list[GpuSpec], model: str,
            memory_gb: float | None = None) -> list[GpuSpec]:
    """Best first: closest to ``memory_gb`` if given, then the family default's form factor,
    then the default's memory."""
    default_name = FAMILY_DEFAULTS.get(model)
    if default_name is None:
        return sorted(candidates, key=lambda s: s.name)
    default = entries_by_name()[default_name].spec
    return sorted(candidates, key=lambda s: (
        0.0 if memory_gb is None else abs(s.memory_gb - memory_gb),
        _form_class(s.form_factor) != _form_class(default.form_factor),
        abs(s.memory_gb - default.memory_gb),
        s.name,
    ))


_CACHE: dict[tuple[str, float | None], str | None] = {}


def try_resolve_gpu_name(name: str, *, memory_gb: float | None = None) -> str | None:
    """The canonical catalog name for ``name``, or None (unknown GPU, TPU, Trainium, ...).

    ``memory_gb`` (per GPU, from a source's own metadata) picks between memory variants when
    the name leaves them open; it never makes a known name fail.
    """
    if not isinstance(name, str):
        return None  # a GPU is named by text; anything else names none
    if memory_gb is not None and not (math.isfinite(memory_gb) and memory_gb > 0):
        memory_gb = None  # NaN/0 mean "not reported" in price tables; NaN would defeat the cache
    key = (name, memory_gb)
    try:
        return _CACHE[key]
    except KeyError:
        pass
    result = _lookup(_parse(name), memory_gb)
    _CACHE[key] = result
    return result


def is_gpu_name(name: str) -> bool:
    """Whether ``name`` is a GPU the catalog knows (False for TPUs, Trainium, FPGAs, ...)."""
    return try_resolve_gpu_name(name) is not None


def suggest(name: str, limit: int = 3) -> tuple[str, ...]:
    """Up to ``limit`` canonical names closest to ``name`` (empty for non-GPU accelerators)."""
    parsed = _parse(name)
    if parsed.non_gpu:
        return ()
    index = _index()
    keys = index.suggestion_keys
    # a known family with an impossible variant ("A100 64GB"): its closest members come first
    found = [spec.name for spec in _ranked(_family(parsed.model), parsed.model, parsed.memory_gb)]
    for query in (parsed.model, name.casefold()):
        for key in difflib.get_close_matches(query, keys, n=10, cutoff=0.5):
            if keys[key] not in found:
                found.append(keys[key])
    return tuple(found[:limit])


@functools.cache
def _filter_families() -> dict[str, tuple[str, ...]]:
    """Model key -> every canonical name a filter of that key means, in catalog order: the
    key's own family and the Ada generation of it."""
    families = {model: list(members) for model, members in _index().families.items()}
    for model, members in _index().families.items():
        base = model.removesuffix(_GENERATION_SUFFIX)
        if base != model and base:
            found = families.setdefault(base, [])
            found += [m for m in members if m not in found]
    order = {entry.spec.name: i for i, entry in enumerate(entries())}
    return {model: tuple(sorted(members, key=order.__getitem__))
            for model, members in families.items()}


@functools.cache
def match_gpu_names(name: str) -> tuple[str, ...]:
    """Every catalog GPU a filter ``name`` means, the family default's kind first; raises
    UnknownGpuError (with suggestions) when it means none.

    A catalog name as the catalog spells it (any case) is that GPU alone; otherwise the family
    narrowed by the form factor and memory the name states ("A100", "A100 80GB", "H100 PCIe").
    """
    spelled = " ".join(name.split()).casefold()
    exact = next((e.spec.name for e in entries() if e.spec.name.casefold() == spelled), None)
    if exact is not None:
        return (exact,)
    parsed = _parse(name)
    resolved = resolve_gpu_name(name)  # unknown names fail here, with suggestions
    specs = entries_by_name()
    candidates = [specs[n].spec for n in _filter_families().get(parsed.model, ())]
    if parsed.form is not None:
        candidates = [s for s in candidates if _form_class(s.form_factor) == parsed.form]
    if parsed.memory_gb is not None:
        candidates = [s for s in candidates if _memory_matches(s.memory_gb, parsed.memory_gb)]
    if resolved not in {s.name for s in candidates}:
        return (resolved,)  # an alias of one row ("T4g", "A6000")
    return tuple(s.name for s in _ranked(candidates, parsed.model))


def variant_note(name: str) -> str:
    """Where one GPU must be chosen for ``--gpu name``: which variant was taken, when the name
    means several ("" when it means one)."""
    matched = match_gpu_names(name)
    if len(matched) < 2:
        return ""
    taken = resolve_gpu_name(name)
    others = ", ".join(m for m in matched if m != taken)
    return (f"--gpu {name} took {taken}, the variant a bare {name!r} means; name another to "
            f"choose it: {others}")


def match_note(name: str, matched: tuple[str, ...]) -> str:
    """What a filter name matched, when it matched more than one GPU ("" otherwise)."""
    return f"--gpu {name} matched {', '.join(matched)}" if len(matched) > 1 else ""


def resolve_gpu_name(name: str, *, memory_gb: float | None = None) -> str:
    """The canonical catalog name for ``name``; raises UnknownGpuError with suggestions."""
    resolved = try_resolve_gpu_name(name, memory_gb=memory_gb)
    if resolved is None:
        raise UnknownGpuError(name, suggest(name) if isinstance(name, str) else ())
    return resolved
