"""llama.cpp's DeepSeek multi-token prediction (the NextN block of deepseek_checkpoint.py's mtp
files), through llama-cpp-python's low-level bindings; nothing of radixserve is involved.

As llama.cpp's own MTP driver (common/speculative.cpp, common_speculative_impl_draft_mtp::process)
does: a normal context on the model (loaded with load_mtp) yields the main model's output-normed
hidden state h_q of every position (llama_get_embeddings_nextn, unmasked); an MTP context
(LLAMA_CONTEXT_TYPE_MTP: deepseek2.cpp graph_mtp, with its own KV cache) is then fed entry q =
(token x_q at position q, state h_{q-1}), h_{-1} = 0: DeepSeek-V3's MTP module at i = q - 1,
whose logits predict token q + 1 (as the main model's at position q do). The state goes in as
the entry's token embedding (llama_batch_ext_set_embd_token, as common_batch::set_embd does):
llm_graph_input_embd_h::set_input feeds ubatch->embd to the graph's h input, while the graph
embeds the token id itself; llama_batch_ext_set_embd_state is a stub that returns false. The
nextn functions live in llama-ext.h, exported under C++-mangled names."""
import ctypes

import numpy as np


def _ext(lib, name, argtypes, restype):
    f = getattr(lib, name)
    f.argtypes, f.restype = argtypes, restype
    return f


def _process(C, ctx, tokens, states=None, chunk=None, start=0, get_states=None):
    """Decodes tokens at positions start.. in chunks of `chunk` entries (all at once by default),
    every entry an output; states: one row per entry, its embedding (the MTP state). Returns the
    logits [n, vocab] (float32), and with get_states (the context's nextn-state getter) also the
    output states [n, H]."""
    n_vocab = C.llama_vocab_n_tokens(C.llama_model_get_vocab(C.llama_get_model(ctx)))
    H = C.llama_model_n_embd(C.llama_get_model(ctx))
    batch = C.llama_batch_ext_init(ctx)
    chunk = chunk or len(tokens)
    logits, out_states = [], []
    try:
        for first in range(0, len(tokens), chunk):
            C.llama_batch_ext_clear(batch)
            for q in range(first, min(first + chunk, len(tokens))):
                i = C.llama_batch_ext_add_token(batch, 0, tokens[q])
                assert i >= 0, f"llama_batch_ext_add_token: {i}"
                assert C.llama_batch_ext_set_pos(batch, i, ctypes.byref(C.llama_pos(start + q)))
                if states is not None:
                    row = C.llama_embd(states[q].ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                       1, states.shape[1])
                    assert C.llama_batch_ext_set_embd_token(batch, i, row)
                assert C.llama_batch_ext_set_output_logits(batch, i, True)
            rc = C.llama_process(ctx, C.LLAMA_PROCESS_TYPE_DECODE, batch)
            assert rc == 0, f"llama_process: {rc}"
            n = min(first + chunk, len(tokens)) - first
            logits.append(np.ctypeslib.as_array(C.llama_get_logits(ctx), (n, n_vocab)).copy())
            if get_states is not None:
                out_states.append(np.ctypeslib.as_array(get_states(ctx), (n, H)).copy())
    finally:
        C.llama_batch_ext_free(batch)
    if get_states is None:
        return np.concatenate(logits)
    return np.concatenate(logits), np.concatenate(out_states)


class LlamaCppMtp:
    """llama.cpp's main model and its NextN block on one GGUF file, sequence 0 of a target context
    (the output-normed hidden states of every position) and of an MTP context (the block, with
    its own KV cache), as llama.cpp's MTP driver sets them up. CPU, 2 threads, no flash attention,
    F32 KV cache. Only a deepseek2 file with q_lora_rank > 0 (the "v3" variant) in the split MLA
    form: llama.cpp's graph_mtp asserts it, aborting the process, so this refuses other files
    first. Use as a context manager."""

    def __init__(self, gguf_path, n_ctx=512):
        import llama_cpp.llama_cpp as C
        self.C = C
        self._set_nextn = _ext(C._lib, "_Z26llama_set_embeddings_nextnP13llama_contextbb",
                               [C.llama_context_p_ctypes, ctypes.c_bool, ctypes.c_bool], None)
        self._get_nextn = _ext(C._lib, "_Z26llama_get_embeddings_nextnP13llama_context",
                               [C.llama_context_p_ctypes], ctypes.POINTER(ctypes.c_float))
        C.llama_backend_init()
        mparams = C.llama_model_default_params()
        mparams.n_gpu_layers, mparams.use_extra_bufts, mparams.load_mtp = 0, False, True
        self.model = C.llama_model_load_from_file(str(gguf_path).encode(), mparams)
        assert self.model, f"cannot load {gguf_path}"
        self.contexts = []
        try:
            if (self._meta("deepseek2.nextn_predict_layers") != "1"
                    or int(self._meta("deepseek2.attention.q_lora_rank") or 0) <= 0
                    or self._meta("deepseek2.attention.key_length_mla") is None):
                raise ValueError(f"{gguf_path}: llama.cpp's deepseek2 MTP graph needs one NextN "
                                 "block, q_lora_rank > 0 and the split MLA form")
            self.hidden = C.llama_model_n_embd(self.model)
            self.target = self._context(C.LLAMA_CONTEXT_TYPE_DEFAULT, None, n_ctx)
            self._set_nextn(self.target, True, False)
            # The driver's MTP context: ctx_other = the target (used by KV-sharing archs only).
            self.mtp = self._context(C.LLAMA_CONTEXT_TYPE_MTP, self.target, n_ctx)
            self._set_nextn(self.mtp, True, True)
        except BaseException:
            self.close()
            raise

    def _meta(self, key):
        buf = ctypes.create_string_buffer(64)
        n = self.C.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        return buf.value.decode() if n >= 0 else None

    def _context(self, ctx_type, other, n_ctx):
        C = self.C
        cparams = C.llama_context_default_params()
        cparams.n_ctx = cparams.n_batch = cparams.n_ubatch = n_ctx
        cparams.n_threads = cparams.n_threads_batch = 2
        cparams.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_DISABLED
        cparams.type_k = cparams.type_v = C.GGML_TYPE_F32
        cparams.ctx_type, cparams.ctx_other = ctx_type, other
        ctx = C.llama_init_from_model(self.model, cparams)
        assert ctx, "cannot create the llama.cpp context"
        self.contexts.append(ctx)
        return ctx

    def close(self):
        for ctx in reversed(self.contexts):
            self.C.llama_free(ctx)
        self.contexts = []
        if self.model:
            self.C.llama_model_free(self.model)
            self.model = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def states(self, tokens):
        """The main model's output-normed hidden states [N, H] of the teacher-forced tokens."""
        self.C.llama_memory_clear(self.C.llama_get_memory(self.target), True)
        _process(self.C, self.target, tokens)
        return np.ctypeslib.as_array(self._get_nextn(self.target),
                                     (len(tokens), self.hidden)).copy()

    def block(self, tokens, states, start, chunk=None):
        """The block's entries for tokens at positions start.. with their states (one row each):
        (logits [n, vocab], the block's output states [n, H], the next draft step's input). Its
        KV cache keeps them: truncate() drops entries from a position on."""
        return _process(self.C, self.mtp, tokens, np.ascontiguousarray(states, np.float32),
                        chunk, start, self._get_nextn)

    def truncate(self, position):
        self.C.llama_memory_seq_rm(self.C.llama_get_memory(self.mtp), 0, position, -1)


def llama_cpp_mtp(gguf_path, tokens, n_ctx=512, chunk=None):
    """(h [N, H], mtp_logits [N, vocab]) float32 for the teacher-forced tokens: the main model's
    output-normed hidden state at every position, and the NextN block's logits for entry q =
    (tokens[q], h[q - 1]) (h[-1] = 0), the MTP entries processed `chunk` at a time (all at once
    by default)."""
    with LlamaCppMtp(gguf_path, n_ctx) as ref:
        h = ref.states(tokens)
        states = np.concatenate([np.zeros((1, ref.hidden), np.float32), h[:-1]])
        return h, ref.block(tokens, states, 0, chunk)[0]
