#include "main/warmup.h"

#include <future>
#include <memory>

#include "common/log.h"

namespace radixserve {

Status RunWarmup(api::ServerContext& ctx) {
  if (!ctx.model.is_generation) {
    engine::EmbedRequest request;
    request.rid = "WARMUP";
    request.input_ids = {0, 1, 2, 3};
    for (int32_t& id : request.input_ids) id = id % static_cast<int32_t>(ctx.model.vocab_size);
    auto done = std::make_shared<std::promise<engine::EmbedResult>>();
    auto result = done->get_future();
    RADIX_RETURN_IF_ERROR(ctx.engine->SubmitEmbed(
        std::move(request), [done](engine::EmbedResult r) { done->set_value(std::move(r)); }));
    engine::EmbedResult r = result.get();
    if (!r.status.ok()) return Internal("warmup embedding failed: " + r.status.message());
    RADIX_LOG_INFO("warmup done (embedding)");
    return Status::Ok();
  }
  {
    engine::GenerateRequest request;
    request.rid = "WARMUP";
    request.input_ids = {0, 1, 2, 3};
    for (int32_t& id : request.input_ids) id = id % static_cast<int32_t>(ctx.model.vocab_size);
    request.sampling.max_new_tokens = 4;
    request.sampling.top_k = 1;
    request.detokenize = false;
    auto done = std::make_shared<std::promise<engine::RequestEvent>>();
    auto result = done->get_future();
    Status submitted = ctx.engine->Submit(std::move(request), [done](engine::RequestEvent event) {
      if (event.finished) done->set_value(std::move(event));
    });
    if (!submitted.ok()) return submitted;
    engine::RequestEvent event = result.get();
    if (event.finish_reason && event.finish_reason->kind == engine::FinishKind::kAbort) {
      return Internal("warmup request aborted: " + event.finish_reason->message);
    }
    RADIX_LOG_INFO("warmup done in {:.3f} s", event.e2e_latency_s);
  }
  return Status::Ok();
}

}  // namespace radixserve
