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


def _process(C, ctx, tokens, states=None, chunk=None):
    """Decodes tokens at positions 0.. in chunks of `chunk` entries (all at once by default),
    every entry an output; states: one row per entry, its embedding (the MTP state). Returns the
    logits [n, vocab] (float32)."""
    n_vocab = C.llama_vocab_n_tokens(C.llama_model_get_vocab(C.llama_get_model(ctx)))
    batch = C.llama_batch_ext_init(ctx)
    chunk = chunk or len(tokens)
    logits = []
    try:
        for start in range(0, len(tokens), chunk):
            C.llama_batch_ext_clear(batch)
            for q in range(start, min(start + chunk, len(tokens))):
                i = C.llama_batch_ext_add_token(batch, 0, tokens[q])
                assert i >= 0, f"llama_batch_ext_add_token: {i}"
                assert C.llama_batch_ext_set_pos(batch, i, ctypes.byref(C.llama_pos(q)))
                if states is not None:
                    row = C.llama_embd(states[q].ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                       1, states.shape[1])
                    assert C.llama_batch_ext_set_embd_token(batch, i, row)
                assert C.llama_batch_ext_set_output_logits(batch, i, True)
            rc = C.llama_process(ctx, C.LLAMA_PROCESS_TYPE_DECODE, batch)
            assert rc == 0, f"llama_process: {rc}"
            n = min(start + chunk, len(tokens)) - start
            logits.append(np.ctypeslib.as_array(C.llama_get_logits(ctx), (n, n_vocab)).copy())
    finally:
        C.llama_batch_ext_free(batch)
    return np.concatenate(logits)


def llama_cpp_mtp(gguf_path, tokens, n_ctx=512, chunk=None):
    """(h [N, H], mtp_logits [N, vocab]) float32 for the teacher-forced tokens: the main model's
    output-normed hidden state at every position, and the NextN block's logits for entry q =
    (tokens[q], h[q - 1]) (h[-1] = 0), the MTP entries processed `chunk` at a time (all at once
    by default). CPU, 2 threads, no flash attention, F32 KV cache. Only a deepseek2 file with
    q_lora_rank > 0 (the "v3" variant) in the split MLA form: llama.cpp's graph_mtp asserts it,
    aborting the process, so this refuses other files first."""
    import llama_cpp.llama_cpp as C
    set_nextn = _ext(C._lib, "_Z26llama_set_embeddings_nextnP13llama_contextbb",
                     [C.llama_context_p_ctypes, ctypes.c_bool, ctypes.c_bool], None)
    get_nextn = _ext(C._lib, "_Z26llama_get_embeddings_nextnP13llama_context",
                     [C.llama_context_p_ctypes], ctypes.POINTER(ctypes.c_float))
    C.llama_backend_init()
    mparams = C.llama_model_default_params()
    mparams.n_gpu_layers, mparams.use_extra_bufts, mparams.load_mtp = 0, False, True
    model = C.llama_model_load_from_file(str(gguf_path).encode(), mparams)
    assert model, f"cannot load {gguf_path}"
    contexts = []
    try:
        def meta(key):
            buf = ctypes.create_string_buffer(64)
            n = C.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
            return buf.value.decode() if n >= 0 else None
        if (meta("deepseek2.nextn_predict_layers") != "1"
                or int(meta("deepseek2.attention.q_lora_rank") or 0) <= 0
                or meta("deepseek2.attention.key_length_mla") is None):
            raise ValueError(f"{gguf_path}: llama.cpp's deepseek2 MTP graph needs one NextN "
                             "block, q_lora_rank > 0 and the split MLA form")

        def context(ctx_type, other=None):
            cparams = C.llama_context_default_params()
            cparams.n_ctx = cparams.n_batch = cparams.n_ubatch = n_ctx
            cparams.n_threads = cparams.n_threads_batch = 2
            cparams.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_DISABLED
            cparams.type_k = cparams.type_v = C.GGML_TYPE_F32
            cparams.ctx_type, cparams.ctx_other = ctx_type, other
            ctx = C.llama_init_from_model(model, cparams)
            assert ctx, "cannot create the llama.cpp context"
            contexts.append(ctx)
            return ctx

        target = context(C.LLAMA_CONTEXT_TYPE_DEFAULT)
        set_nextn(target, True, False)
        _process(C, target, tokens)
        H = C.llama_model_n_embd(model)
        h = np.ctypeslib.as_array(get_nextn(target), (len(tokens), H)).copy()
        # The driver's MTP context: ctx_other = the target (used by KV-sharing archs only).
        mtp = context(C.LLAMA_CONTEXT_TYPE_MTP, target)
        states = np.concatenate([np.zeros((1, H), np.float32), h[:-1]])
        return h, _process(C, mtp, tokens, states, chunk)
    finally:
        for ctx in reversed(contexts):
            C.llama_free(ctx)
        C.llama_model_free(model)
