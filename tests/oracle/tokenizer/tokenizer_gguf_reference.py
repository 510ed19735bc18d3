"""Reference tokenizers for GGUF vocabularies.

* llama.cpp itself through llama-cpp-python (`Llama(path, vocab_only=True)`), when installed.
* transformers' own GGUF -> tokenizers conversion (`convert_gguf_tokenizer`). transformers reads
  GGUF metadata with a module that imports torch; without torch we hand it the metadata read by
  `gguf` (llama.cpp's official Python reader) instead. Nothing of ours is involved.
"""

import sys
import types


def _read_gguf_metadata(path, string_arrays=()):
    import gguf

    reader = gguf.GGUFReader(path)
    meta = {}
    for key, field in reader.fields.items():
        if not field.types:
            continue
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            if field.types[-1] == gguf.GGUFValueType.STRING:
                meta[key] = [bytes(field.parts[i]).decode("utf-8", errors="surrogateescape")
                             for i in field.data]
            else:
                meta[key] = [field.parts[i].tolist()[0] for i in field.data]
        elif field.types[0] == gguf.GGUFValueType.STRING:
            meta[key] = bytes(field.parts[field.data[0]]).decode("utf-8")
        else:
            meta[key] = field.parts[field.data[0]].tolist()[0]
    return meta, tuple(t.name for t in reader.tensors)


def transformers_gguf_tokenizer(path):
    """(tokenizers.Tokenizer, tokenizer_config dict) as transformers converts the GGUF vocab."""
    try:
        import torch  # noqa: F401
    except ImportError:
        module = types.ModuleType("transformers.integrations.gguf.reader")
        module.read_gguf_metadata = _read_gguf_metadata
        sys.modules.setdefault("transformers.integrations.gguf.reader", module)
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (
        convert_gguf_tokenizer, get_gguf_tokenizer)

    architecture, tokenizer_dict, config = get_gguf_tokenizer(str(path))
    backend, _ = convert_gguf_tokenizer(architecture, tokenizer_dict)
    return backend, config


def llama_cpp_vocab(path):
    """llama_cpp.Llama with only the vocabulary loaded, or None without llama-cpp-python."""
    try:
        import llama_cpp
    except ImportError:
        return None
    return llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
