"""Type stubs of the extension module regflash._native (python/src/lib.rs)."""

from typing import Any, Callable, List, Optional, Tuple

Progress = Optional[Callable[[int, int], Any]]

class RegflashError(Exception): ...

class Design:
    def __init__(
        self,
        head_dim: int,
        preset: Optional[str] = None,
        config: Optional[str] = None,
        variant: Optional[str] = None,
        rescale: Optional[str] = None,
        lazy_threshold: Optional[int] = None,
        in_format: Optional[str] = None,
        qk_format: Optional[str] = None,
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def in_format(self) -> str: ...
    @property
    def short_dtype(self) -> str: ...
    @property
    def numpy_short(self) -> bool: ...
    def short_values(self) -> bytes: ...
    @property
    def qk_format(self) -> Optional[str]: ...
    @property
    def variant(self) -> str: ...
    @property
    def head_dim(self) -> int: ...
    def toml(self) -> str: ...
    def run(
        self,
        backend: str,
        q: bytes,
        k: bytes,
        v: bytes,
        heads: int,
        kv_heads: int,
        q_len: int,
        k_len: int,
        causal: bool,
        out_f32: bool,
        threads: int,
        scales: List[int] = [0, 0, 0],
        progress: Progress = None,
    ) -> Tuple[bytes, str]: ...
    def operands(
        self, data: bytes, itemsize: int, shape: List[int], name: str
    ) -> Tuple[bytes, int]: ...
    def merge_reports(self, reports: List[str]) -> str: ...
    def backward(
        self,
        q: bytes,
        k: bytes,
        v: bytes,
        d_o: bytes,
        heads: int,
        kv_heads: int,
        q_len: int,
        k_len: int,
        causal: bool,
        out_f32: bool,
        threads: int,
        check: bool = True,
    ) -> Tuple[bytes, bytes, bytes, str]: ...
    def estimate(
        self, seq: List[int], heads: int = 1, causal: bool = False, progress: Progress = None
    ) -> str: ...
    def compare(
        self,
        seq: List[int],
        causal: bool = False,
        heads: int = 1,
        max_sim_seq: int = 4096,
        glb: str = "config",
        claims: bool = False,
        spill_keys: Optional[int] = None,
        progress: Progress = None,
        kv_heads: Optional[int] = None,
    ) -> str: ...
