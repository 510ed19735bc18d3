// ForwardScratch: the activation buffers of one forward step, kept per calling thread so a step
// allocates nothing once the largest batch has been seen. Several engine replicas may run
// Forward on one shared model from their own threads; each thread gets its own scratch.
//
// Buffers only grow (Reserve), never shrink. Pool workers may write into them during the step;
// they belong to the thread that called Forward and are reused by its next step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/quant_matmul.h"

namespace radixserve::model {

class LoraAdapter;

struct ForwardScratch {
  std::vector<float> x;        // [T, hidden] residual stream
  std::vector<float> h;        // [T, hidden] normed input / block output
  std::vector<float> qkv;      // [T, q + 2 kv] (fused) or q alone
  std::vector<float> k, v;     // [T, kv] when Q/K/V are not fused
  std::vector<float> q_split;  // [T, q], fused Q/K/V of a multi-token step, split for attention
  std::vector<float> k_split, v_split;
  std::vector<float> attn;                      // [T, q]
  std::vector<float> gate_up;                   // [T, 2 * intermediate] (fused) or gate alone
  std::vector<float> up;                        // [T, intermediate] when gate/up are not fused
  std::vector<float> gated;                     // [T, intermediate]
  std::vector<float> rope_cos[2], rope_sin[2];  // [T, rotary_dim / 2] per rope frequency set
  std::vector<float> final_rows;                // [logit rows + hidden rows, hidden]
  std::vector<float> mtp_in;      // [T, 2 * hidden] normed embedding and hidden state (ForwardMtp)
  std::vector<float> stage_rows;  // [rows, hidden] travelling from the last pipeline stage
  // Mixture-of-experts FFN (moe_ffn.h); (token, k) pairs grouped by expert.
  std::vector<float> moe_router;             // [T, experts] router logits, then probabilities
  std::vector<float> moe_weight;             // [T, top_k]
  std::vector<float> moe_in;                 // [T * top_k, hidden] token rows grouped by expert
  std::vector<float> moe_gate, moe_up;       // [T * top_k, moe_intermediate]
  std::vector<float> moe_out;                // [T * top_k, hidden]
  std::vector<int32_t> moe_choice;           // [T, top_k] expert ids
  std::vector<int32_t> moe_slot;             // [T, top_k] physical slots (expert_placement.h)
  std::vector<int32_t> moe_row_of;           // [T, top_k] row in the grouped buffers
  std::vector<int32_t> moe_start;            // [slots + 1] first grouped row of each local slot
  std::vector<int32_t> moe_next;             // [slots] fill cursor
  std::vector<kernels::MatMulJob> moe_jobs;  // the slots' grouped matmuls
  // Multi-head latent attention (mla_attention.h): one head's rows in and out of its matrix.
  std::vector<float> mla_in, mla_out;
  // LoRA (lora_adapter.h): the token rows of sequences with an adapter, grouped by adapter, and
  // each one's adapter.
  std::vector<int32_t> lora_rows;
  std::vector<const LoraAdapter*> lora_row_adapter;

  // The calling thread's scratch.
  static ForwardScratch& ForThisThread();

  // Grows `buffer` to at least n floats; returns its data.
  static float* Reserve(std::vector<float>& buffer, int64_t n);
};

}  // namespace radixserve::model
