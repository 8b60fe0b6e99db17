"""Type stub of the Rust scrub engine (engine/src/lib.rs), built by `make setup`."""

class EngineError(Exception): ...

def shannon_entropy(data: bytes) -> float: ...

class Engine:
    def __init__(
        self,
        rules: list[
            tuple[
                str,
                str,
                list[str],
                float | None,
                int,
                str | None,
                list[tuple[list[str], list[str], str, str]],
            ]
        ],
        hmac_key: bytes | None = None,
    ) -> None: ...
    def find(self, data: bytes, first_only: bool = False) -> list[tuple[int, int, int]]: ...
    def mask(self, data: bytes) -> tuple[bytes, list[int]] | None: ...
