#include "api/lora_api.h"

#include <optional>
#include <string>

#include "api/json_body.h"
#include "api/openai_common.h"
#include "api/serving.h"
#include "common/work_queue.h"

namespace radixserve::api {
namespace {

using nlohmann::json;

json LoadedAdapters(const ServerContext& ctx) {
  json out = json::object();
  if (ctx.lora_registry == nullptr) return out;
  for (const engine::LoraRef& ref : ctx.lora_registry->List()) out[ref.name] = ref.path;
  return out;
}

void Answer(const ServerContext& ctx, ResponseWriter& writer, const Status& status) {
  const json body = {{"success", status.ok()},
                     {"error_message", status.ok() ? json(nullptr) : json(status.message())},
                     {"loaded_adapters", LoadedAdapters(ctx)}};
  writer.Send(status.ok() ? 200 : 400, "application/json", ToJsonText(body));
}

// The body's string field `key`, or an error naming it.
Expected<std::string> StringField(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
    return InvalidArgument(std::string(key) + " must be a non-empty string");
  }
  return it->get<std::string>();
}

// The request body as an object, or the error to answer.
Expected<json> BodyObject(const ServerContext& ctx, const ApiRequest& request) {
  if (ctx.lora_registry == nullptr) {
    return InvalidArgument("LoRA is not enabled. Please set `--enable-lora` to enable LoRA.");
  }
  ApiExpected<json> body = ParseJsonObjectBody(request.body);
  if (!body.ok()) return InvalidArgument(body.status().message);
  return std::move(body).value();
}

}  // namespace

void HandleLoadLoraAdapter(ServerContext& ctx, const ApiRequest& request,
                           ResponseWriterPtr writer) {
  auto body = BodyObject(ctx, request);
  if (!body.ok()) return Answer(ctx, *writer, body.status());
  for (const auto& [key, value] : body->items()) {
    (void)value;
    if (key != "lora_name" && key != "lora_path" && key != "pinned" && key != "lora_id") {
      return Answer(ctx, *writer, InvalidArgument("unknown field '" + key + "'"));
    }
  }
  auto name = StringField(*body, "lora_name");
  if (!name.ok()) return Answer(ctx, *writer, name.status());
  auto path = StringField(*body, "lora_path");
  if (!path.ok()) return Answer(ctx, *writer, path.status());
  bool pinned = false;
  if (auto it = body->find("pinned"); it != body->end() && !it->is_null()) {
    if (!it->is_boolean()) return Answer(ctx, *writer, InvalidArgument("pinned must be a boolean"));
    pinned = it->get<bool>();
  }
  auto load = [&ctx, writer, name = *name, path = *path, pinned] {
    Answer(ctx, *writer, ctx.lora_registry->Load(name, path, pinned));
  };
  PostOrRun(ctx.lora_queue, std::move(load));
}

void HandleUnloadLoraAdapter(ServerContext& ctx, const ApiRequest& request,
                             ResponseWriterPtr writer) {
  auto body = BodyObject(ctx, request);
  if (!body.ok()) return Answer(ctx, *writer, body.status());
  auto name = StringField(*body, "lora_name");
  if (!name.ok()) return Answer(ctx, *writer, name.status());
  Answer(ctx, *writer, ctx.lora_registry->Unload(*name));
}

json LoraModelCards(const ServerContext& ctx) {
  json cards = json::array();
  if (ctx.lora_registry == nullptr) return cards;
  for (const engine::LoraRef& ref : ctx.lora_registry->List()) {
    cards.push_back({{"id", ctx.served_model_name + ":" + ref.name},
                     {"object", "model"},
                     {"created", openai::NowSeconds()},
                     {"owned_by", "sglang"},
                     {"root", ref.path},
                     {"parent", ctx.served_model_name},
                     {"max_model_len", ctx.model.context_len}});
  }
  return cards;
}

}  // namespace radixserve::api
