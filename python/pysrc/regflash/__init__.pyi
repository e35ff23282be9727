"""Type stubs of regflash's Python API (see __init__.py for the documentation)."""

from os import PathLike
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Union

import numpy as np

from ._native import Design as Design
from ._native import RegflashError as RegflashError

__all__ = [
    "FlashAttention",
    "Design",
    "RegflashError",
    "estimate",
    "compare",
    "flash_attn_func",
    "flash_attn_backward",
]

# A callable taking (done, total), True (a tqdm bar when tqdm is installed: the default) or
# False (none).
Progress = Union[None, bool, Callable[[int, int], Any]]
Causal = Union[bool, Literal["bottom-right", "top-left"]]

class FlashAttention:
    design: Design
    head_dim: int
    causal: bool
    alignment: str
    backend: str
    layout: str
    out_dtype: Optional[np.dtype]
    threads: int
    check: bool
    report: Optional[Dict[str, Any]]
    def __init__(
        self,
        head_dim: int,
        causal: Causal = False,
        *,
        preset: Optional[str] = None,
        config: Optional[Union[str, PathLike]] = None,
        backend: str = "model",
        variant: Optional[str] = None,
        layout: str = "bhsd",
        out_dtype: Any = None,
        threads: Optional[int] = None,
        rescale: Optional[str] = None,
        lazy_threshold: Optional[int] = None,
        in_format: Optional[str] = None,
        qk_format: Optional[str] = None,
        progress: Progress = None,
        check: Optional[bool] = None,
    ) -> None: ...
    def __call__(
        self,
        q: Any,
        k: Any,
        v: Any,
        *,
        cu_seqlens_q: Optional[Sequence[int]] = None,
        cu_seqlens_k: Optional[Sequence[int]] = None,
    ) -> Any: ...

def flash_attn_func(
    q: Any, k: Any, v: Any, causal: Causal = False, *, layout: str = "bshd", **kwargs: Any
) -> Any: ...

def flash_attn_backward(
    dout: Any,
    q: Any,
    k: Any,
    v: Any,
    causal: Causal = False,
    *,
    layout: str = "bshd",
    preset: Optional[str] = None,
    config: Optional[Union[str, PathLike]] = None,
    variant: Optional[str] = None,
    in_format: Optional[str] = None,
    out_dtype: Any = None,
    threads: Optional[int] = None,
    check: bool = True,
    report: bool = False,
    cu_seqlens_q: Optional[Sequence[int]] = None,
    cu_seqlens_k: Optional[Sequence[int]] = None,
) -> Any: ...

def estimate(
    seq: Union[int, Sequence[int]],
    *,
    head_dim: int = 128,
    preset: Optional[str] = None,
    config: Optional[Union[str, PathLike]] = None,
    variant: Optional[str] = None,
    heads: int = 1,
    causal: bool = False,
    progress: Progress = None,
) -> Dict[str, Any]: ...

def compare(
    seq: Union[int, Sequence[int]],
    *,
    head_dim: int = 16,
    preset: Optional[str] = None,
    config: Optional[Union[str, PathLike]] = None,
    causal: bool = False,
    heads: int = 1,
    kv_heads: Optional[int] = None,
    max_sim_seq: int = 4096,
    glb: str = "config",
    claims: bool = False,
    spill_keys: Optional[int] = None,
    progress: Progress = None,
) -> Dict[str, Any]: ...
