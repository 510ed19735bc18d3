// The serving template (serving.h) with each route's parser and formatter, driven through a
// scripted engine: the test decides which tokens and text the engine produces, so every expected
// body below is written out from the documented response shapes, not captured from our output:
// - /generate: SGLang's native API docs ("text", "output_ids", "meta_info" with id,
//   finish_reason {"type": "length", "length": N} / {"type": "stop", "matched": ...},
//   prompt_tokens, completion_tokens, cached_tokens; streamed items are cumulative; the stream
//   ends with "data: [DONE]").
// - /v1/completions and /v1/chat/completions: OpenAI's API reference (text_completion,
//   chat.completion and chat.completion.chunk objects; usage; stream_options.include_usage adds a
//   last chunk with empty choices) with SGLang's extras (matched_stop, metadata.weight_version).
// - RTP-LLM's POST /: its source (frontend_worker.py PipelineResponse {response, finished,
//   aux_info, output_ids [[...]]}, base_model_datatypes.py AuxInfo, frontend_server.py streams
//   ending with "data:[done]", misc.py format_exception {error_code, error_code_str, message}).
// - Errors: OpenAI's error object {"object": "error", "message", "type", "param", "code"} as
//   SGLang fills it, and /generate's {"error": {"message"}}.
#include "api/serving.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/generate_api.h"
#include "api/openai_api.h"
#include "api/rtp_llm_api.h"
#include "args/server_args.h"
#include "chat/chat_template.h"
#include "tokenizer/tokenizer_loader.h"

namespace radixserve::api {
namespace {

using nlohmann::json;

// Records the submitted requests and their sinks; events are sent by the test.
class ScriptedEngine final : public engine::Engine {
 public:
  struct Submitted {
    engine::GenerateRequest request;
    engine::EventSink sink;
  };

  Status Submit(engine::GenerateRequest request, engine::EventSink sink) override {
    if (refusal) return *refusal;
    submitted.push_back({std::move(request), std::move(sink)});
    return Status::Ok();
  }
  void Abort(std::string_view rid, engine::AbortMatch) override { aborted.emplace_back(rid); }
  void FlushCacheAsync(std::function<void(Status)> done) override { done(Status::Ok()); }
  void PauseAsync(engine::PauseMode, std::function<void()> done) override { done(); }
  void Continue() override {}
  engine::EngineStats Stats() const override { return {}; }
  Status CheckLeaks() const override { return Status::Ok(); }
  void Shutdown() override {}

  std::vector<Submitted> submitted;
  std::vector<std::string> aborted;
  std::optional<Status> refusal;
};

// Records what a handler answers.
class RecordingWriter final : public ResponseWriter {
 public:
  void Send(int status_code, std::string, std::string text) override {
    status = status_code;
    body = json::parse(text);
  }
  void StartStream() override { streaming = true; }
  void SendEvent(std::string data) override { events.push_back(std::move(data)); }
  void EndStream() override { ended = true; }
  void OnDisconnect(std::function<void()>) override {}

  // The events as JSON (the final "[DONE]" excluded); checks the stream ended with it.
  std::vector<json> JsonEvents() const {
    EXPECT_TRUE(ended);
    EXPECT_FALSE(events.empty());
    if (events.empty()) return {};
    EXPECT_EQ(events.back(), "[DONE]");
    std::vector<json> out;
    for (size_t i = 0; i + 1 < events.size(); ++i) out.push_back(json::parse(events[i]));
    return out;
  }

  int status = 0;
  json body;
  bool streaming = false;
  bool ended = false;
  std::vector<std::string> events;
};

const std::string kStoriesGguf =
    std::string(RADIX_SHARED_DIR) + "/models/stories260K/gguf/stories260K.gguf";

class ServingTest : public ::testing::Test {
 protected:
  ServingTest() {
    auto tok = tokenizer::LoadTokenizer(kStoriesGguf);
    EXPECT_TRUE(tok.ok()) << tok.status().message();
    if (tok.ok()) tokenizer_ = std::move(tok).value();
    auto compiled = chat::ChatTemplate::Compile(
        "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}");
    EXPECT_TRUE(compiled.ok());
    if (compiled.ok()) chat_template_.emplace(std::move(compiled).value());
    ctx_.args = &args_;
    ctx_.engine = &engine_;
    ctx_.tokenizer = tokenizer_.get();
    ctx_.chat_template = chat_template_ ? &*chat_template_ : nullptr;
    ctx_.model.context_len = 256;
    ctx_.model.vocab_size = 512;
  }

  using Handler = void (*)(ServerContext&, const std::string&, ResponseWriterPtr);

  std::shared_ptr<RecordingWriter> Call(Handler handler, const json& body) {
    auto writer = std::make_shared<RecordingWriter>();
    handler(ctx_, body.dump(), writer);
    return writer;
  }

  // Sends request `i` an event with `ids` and `text`; `finish` ends it.
  void Emit(size_t i, std::vector<int32_t> ids, std::string text,
            std::optional<engine::FinishReason> finish = std::nullopt) {
    ASSERT_LT(i, engine_.submitted.size());
    completion_[i] += static_cast<int64_t>(ids.size());
    engine::RequestEvent event;
    event.new_token_ids = std::move(ids);
    event.text_delta = std::move(text);
    event.finished = finish.has_value();
    event.finish_reason = std::move(finish);
    event.prompt_tokens = static_cast<int64_t>(engine_.submitted[i].request.input_ids.size());
    event.completion_tokens = completion_[i];
    event.cached_tokens = 0;
    event.e2e_latency_s = 0.5;
    engine_.submitted[i].sink(std::move(event));
  }

  static engine::FinishReason Finish(engine::FinishKind kind) {
    engine::FinishReason reason;
    reason.kind = kind;
    return reason;
  }
  static engine::FinishReason Length() { return Finish(engine::FinishKind::kLength); }

  args::ServerArgs args_;
  ScriptedEngine engine_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::optional<chat::ChatTemplate> chat_template_;
  ServerContext ctx_;
  std::map<size_t, int64_t> completion_;
};

TEST_F(ServingTest, GenerateAnswersWithTextOutputIdsAndMetaInfo) {
  auto writer =
      Call(HandleGenerate,
           {{"input_ids", {1, 2, 3}}, {"rid", "r1"}, {"sampling_params", {{"max_new_tokens", 2}}}});
  ASSERT_EQ(engine_.submitted.size(), 1u);
  EXPECT_EQ(engine_.submitted[0].request.input_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(engine_.submitted[0].request.sampling.max_new_tokens, 2);
  Emit(0, {5}, "a");
  EXPECT_EQ(writer->status, 0) << "nothing is answered before the request finishes";
  Emit(0, {6}, "b", Length());
  EXPECT_EQ(writer->status, 200);
  const json expected = json::parse(R"({
    "text": "ab", "output_ids": [5, 6],
    "meta_info": {"id": "r1", "finish_reason": {"type": "length", "length": 2},
                  "prompt_tokens": 3, "completion_tokens": 2, "cached_tokens": 0,
                  "weight_version": "default", "total_retractions": 0, "e2e_latency": 0.5}})");
  EXPECT_EQ(writer->body, expected);
}

TEST_F(ServingTest, GenerateStreamsCumulativeItemsThenDone) {
  auto writer = Call(HandleGenerate, {{"text", "Hello"}, {"stream", true}, {"rid", "s"}});
  ASSERT_EQ(engine_.submitted.size(), 1u);
  EXPECT_TRUE(writer->streaming);
  Emit(0, {7}, "x");
  engine::FinishReason stop = Finish(engine::FinishKind::kStop);
  stop.matched_token = 2;
  Emit(0, {2}, "", stop);
  std::vector<json> events = writer->JsonEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["text"], "x");
  EXPECT_EQ(events[0]["output_ids"], json({7}));
  EXPECT_TRUE(events[0]["meta_info"]["finish_reason"].is_null());
  EXPECT_EQ(events[1]["text"], "x");
  EXPECT_EQ(events[1]["output_ids"], json({7, 2}));
  EXPECT_EQ(events[1]["meta_info"]["finish_reason"], json::parse(R"({"type":"stop","matched":2})"));
}

TEST_F(ServingTest, GenerateBatchAnswersOneItemPerPrompt) {
  auto writer = Call(HandleGenerate, {{"input_ids", {{1, 2}, {3}}}, {"rid", {"a", "b"}}});
  ASSERT_EQ(engine_.submitted.size(), 2u);
  Emit(1, {9}, "q", Length());
  Emit(0, {8}, "p", Length());
  ASSERT_EQ(writer->status, 200);
  ASSERT_TRUE(writer->body.is_array());
  ASSERT_EQ(writer->body.size(), 2u);
  EXPECT_EQ(writer->body[0]["text"], "p");
  EXPECT_EQ(writer->body[0]["meta_info"]["id"], "a");
  EXPECT_EQ(writer->body[0]["meta_info"]["prompt_tokens"], 2);
  EXPECT_EQ(writer->body[1]["text"], "q");
  EXPECT_EQ(writer->body[1]["meta_info"]["id"], "b");
}

TEST_F(ServingTest, GenerateSchemaErrorsUseTheOpenAiShapeOtherRefusalsTheNativeOne) {
  auto unknown = Call(HandleGenerate, {{"input_ids", {1}}, {"no_such_field", 1}});
  EXPECT_EQ(unknown->status, 400);
  EXPECT_EQ(unknown->body, json::parse(R"({"object": "error",
      "message": "GenerateReqInput got an unexpected field 'no_such_field'",
      "type": "Bad Request", "param": null, "code": 400})"));
  auto embeds = Call(HandleGenerate, {{"input_embeds", {{0.5}}}});
  EXPECT_EQ(embeds->status, 400);
  EXPECT_EQ(
      embeds->body,
      json::parse(R"({"error": {"message": "input_embeds is not supported by radixserve."}})"));
  auto empty = Call(HandleGenerate, json::object());
  EXPECT_EQ(empty->body["error"]["message"],
            "Either text, input_ids or input_embeds should be provided.");
  EXPECT_TRUE(engine_.submitted.empty());
}

TEST_F(ServingTest, RefusedStreamingCallEndsWithAnErrorEventInTheRouteShape) {
  engine_.refusal = Status(StatusCode::kResourceExhausted, "queue full");
  auto native = Call(HandleGenerate, {{"input_ids", {1}}, {"stream", true}});
  std::vector<json> events = native->JsonEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], json::parse(R"({"error": {"message": "queue full"}})"));

  auto openai = Call(HandleCompletions, {{"prompt", {1}}, {"stream", true}});
  events = openai->JsonEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], json::parse(R"({"error": {"object": "error", "message": "queue full",
      "type": "503", "param": null, "code": 503}})"));

  auto plain = Call(HandleCompletions, {{"prompt", {1}}});
  EXPECT_EQ(plain->status, 503);
  EXPECT_FALSE(plain->streaming);
}

TEST_F(ServingTest, CompletionFollowsOpenAisTextCompletionObject) {
  auto writer = Call(HandleCompletions,
                     {{"prompt", {1, 2, 3}}, {"max_tokens", 2}, {"model", "m"}, {"rid", "c1"}});
  ASSERT_EQ(engine_.submitted.size(), 1u);
  EXPECT_EQ(engine_.submitted[0].request.sampling.max_new_tokens, 2);
  Emit(0, {5, 6}, "ab", Length());
  ASSERT_EQ(writer->status, 200);
  json expected = json::parse(R"({
    "id": "c1", "object": "text_completion", "model": "m",
    "choices": [{"index": 0, "text": "ab", "logprobs": null, "finish_reason": "length",
                 "matched_stop": null}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5,
              "prompt_tokens_details": null, "reasoning_tokens": 0},
    "metadata": {"weight_version": "default"}})");
  ASSERT_TRUE(writer->body["created"].is_number_integer());
  expected["created"] = writer->body["created"];
  EXPECT_EQ(writer->body, expected);
}

TEST_F(ServingTest, CompletionStreamSendsDeltasAndAUsageChunk) {
  auto writer = Call(HandleCompletions, {{"prompt", "Once"},
                                         {"stream", true},
                                         {"stream_options", {{"include_usage", true}}},
                                         {"rid", "c2"}});
  ASSERT_EQ(engine_.submitted.size(), 1u);
  Emit(0, {5}, "a");
  Emit(0, {6}, "b", Length());
  std::vector<json> events = writer->JsonEvents();
  ASSERT_EQ(events.size(), 3u);
  for (const json& event : events) {
    EXPECT_EQ(event["id"], "c2");
    EXPECT_EQ(event["object"], "text_completion");
  }
  EXPECT_EQ(events[0]["choices"], json::parse(R"([{"index": 0, "text": "a", "logprobs": null,
      "finish_reason": null, "matched_stop": null}])"));
  EXPECT_EQ(events[1]["choices"], json::parse(R"([{"index": 0, "text": "b", "logprobs": null,
      "finish_reason": "length", "matched_stop": null}])"));
  EXPECT_EQ(events[2]["choices"], json::array());
  EXPECT_EQ(events[2]["usage"]["completion_tokens"], 2);
  EXPECT_EQ(events[2]["usage"]["total_tokens"],
            events[2]["usage"]["prompt_tokens"].get<int64_t>() + 2);
}

TEST_F(ServingTest, ChatStreamOpensWithTheRoleThenContentThenFinish) {
  auto writer = Call(
      HandleChatCompletions,
      {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"stream", true}, {"rid", "ch"}});
  ASSERT_EQ(engine_.submitted.size(), 1u);
  Emit(0, {5}, "Hel");
  Emit(0, {6}, "lo", Length());
  std::vector<json> events = writer->JsonEvents();
  ASSERT_EQ(events.size(), 4u);
  for (const json& event : events) {
    EXPECT_EQ(event["object"], "chat.completion.chunk");
    EXPECT_EQ(event["id"], "ch");
  }
  EXPECT_EQ(events[0]["choices"][0]["delta"],
            json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_EQ(events[1]["choices"][0]["delta"], json::parse(R"({"content": "Hel"})"));
  EXPECT_EQ(events[2]["choices"][0]["delta"], json::parse(R"({"content": "lo"})"));
  EXPECT_EQ(events[3]["choices"][0]["delta"], json::object());
  EXPECT_EQ(events[3]["choices"][0]["finish_reason"], "length");
}

TEST_F(ServingTest, ChatAnswerIsAnAssistantMessage) {
  auto writer = Call(HandleChatCompletions,
                     {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"model", "m"}});
  ASSERT_EQ(engine_.submitted.size(), 1u);
  Emit(0, {5}, "Hello", Finish(engine::FinishKind::kStop));
  ASSERT_EQ(writer->status, 200);
  EXPECT_EQ(writer->body["object"], "chat.completion");
  EXPECT_EQ(writer->body["model"], "m");
  EXPECT_EQ(writer->body["choices"], json::parse(R"([{"index": 0,
      "message": {"role": "assistant", "content": "Hello", "reasoning_content": null,
                  "tool_calls": null},
      "logprobs": null, "finish_reason": "stop", "matched_stop": null}])"));
  EXPECT_EQ(writer->body["usage"]["completion_tokens"], 1);
}

TEST_F(ServingTest, OpenAiFieldsOfTheWrongTypeAreSchemaErrorsNamingTheField) {
  auto writer = Call(HandleChatCompletions,
                     {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"stream", "yes"}});
  EXPECT_EQ(writer->status, 400);
  EXPECT_EQ(writer->body, json::parse(R"({"object": "error",
      "message": "Invalid value for 'stream': expected a boolean.", "type": "Bad Request",
      "param": null, "code": 400})"));
  auto format =
      Call(HandleCompletions,
           {{"prompt", "x"},
            {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "n"}}}}}});
  EXPECT_EQ(format->status, 400);
  EXPECT_EQ(format->body["type"], "BadRequestError");
  EXPECT_EQ(format->body["message"],
            "schema_ is required for json_schema response format request.");
  EXPECT_TRUE(engine_.submitted.empty());
}

TEST_F(ServingTest, AChoiceFailingAfterAdmissionAnswersWithItsStatus) {
  engine::FinishReason failed = Finish(engine::FinishKind::kAbort);
  failed.message = "prompt too long";
  failed.status_code = 400;
  auto openai = Call(HandleCompletions, {{"prompt", {1, 2}}});
  Emit(0, {}, "", failed);
  EXPECT_EQ(openai->status, 400);
  EXPECT_EQ(openai->body["object"], "error");
  EXPECT_EQ(openai->body["message"], "prompt too long");

  auto native = Call(HandleGenerate, {{"input_ids", {1, 2}}});
  Emit(1, {}, "", failed);
  EXPECT_EQ(native->status, 400);
  EXPECT_EQ(native->body, json::parse(R"({"error": {"message": "prompt too long"}})"));
}

void HandleRtp(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer) {
  ServeRtpLlm(ctx, json::parse(body), std::move(writer));
}

TEST_F(ServingTest, RtpLlmMapsGenerateConfigToSamplingParams) {
  auto writer = Call(HandleRtp, {{"prompt", "Hello"},
                                 {"temperature", 0},  // top level wins over generate_config
                                 {"generate_config",
                                  {{"temperature", 0.5},
                                   {"top_k", 0},
                                   {"stop_words_str", {"x"}},
                                   {"stop_words_list", {{7}}},
                                   {"random_seed", 3}}}});
  ASSERT_EQ(engine_.submitted.size(), 1u) << writer->body;
  const engine::GenerateRequest& request = engine_.submitted[0].request;
  EXPECT_EQ(request.sampling.top_k, 1);  // temperature 0: greedy
  EXPECT_EQ(request.sampling.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(request.sampling.stop_token_ids, std::vector<int32_t>{7});
  EXPECT_FALSE(request.sampling.no_stop_trim);         // print_stop_words false
  EXPECT_FALSE(request.sampling.skip_special_tokens);  // RTP-LLM's default
  EXPECT_EQ(request.sampling.sampling_seed, 3u);
  // max_new_tokens 32000 capped to the context (256) left after the prompt.
  EXPECT_EQ(request.sampling.max_new_tokens,
            256 - static_cast<int64_t>(request.input_ids.size()) - 1);
}

TEST_F(ServingTest, RtpLlmAnswersAPipelineResponseWithAuxInfo) {
  auto writer =
      Call(HandleRtp, {{"prompt", "Hello"},
                       {"generate_config", {{"max_new_tokens", 2}, {"return_output_ids", true}}}});
  ASSERT_EQ(engine_.submitted.size(), 1u) << writer->body;
  const auto input_len = static_cast<int64_t>(engine_.submitted[0].request.input_ids.size());
  Emit(0, {5}, "a");
  Emit(0, {6}, "b", Length());
  ASSERT_EQ(writer->status, 200);
  EXPECT_EQ(writer->body["response"], "ab");
  EXPECT_EQ(writer->body["finished"], true);
  EXPECT_EQ(writer->body["output_ids"], json::parse("[[5, 6]]"));
  EXPECT_FALSE(writer->body.contains("input_ids"));
  const json& aux = writer->body["aux_info"];
  EXPECT_EQ(aux["input_len"], input_len);
  EXPECT_EQ(aux["output_len"], 2);
  EXPECT_EQ(aux["cost_time"], 500.0);  // e2e latency 0.5 s, in ms
  EXPECT_EQ(aux["reuse_len"], 0);
  EXPECT_EQ(aux["beam_responses"], json::array());
}

TEST_F(ServingTest, RtpLlmIncrementalStreamSendsDeltasThenDone) {
  auto writer = Call(HandleRtp, {{"prompt", "Hello"},
                                 {"yield_generator", true},
                                 {"generate_config", {{"return_incremental", true}}}});
  ASSERT_EQ(engine_.submitted.size(), 1u) << writer->body;
  Emit(0, {5}, "a");
  Emit(0, {6}, "b", Length());
  ASSERT_EQ(writer->events.size(), 3u);
  EXPECT_EQ(writer->events.back(), "[done]");
  EXPECT_EQ(json::parse(writer->events[0])["response"], "a");
  EXPECT_EQ(json::parse(writer->events[0])["finished"], false);
  EXPECT_EQ(json::parse(writer->events[1])["response"], "b");
  EXPECT_EQ(json::parse(writer->events[1])["finished"], true);
}

TEST_F(ServingTest, RtpLlmRefusalsUseItsErrorBody) {
  auto writer = Call(HandleRtp, {{"prompt", "Hello"}, {"generate_config", {{"num_beams", 2}}}});
  EXPECT_EQ(writer->status, 400);
  EXPECT_EQ(writer->body["error_code"], 515);
  EXPECT_EQ(writer->body["error_code_str"], "515_UNSUPPORTED_OPERATION");
  EXPECT_NE(writer->body["message"].get<std::string>().find("num_beams"), std::string::npos);
  writer = Call(HandleRtp, {{"prompt", "Hello"}, {"generate_config", {{"bogus", 1}}}});
  EXPECT_EQ(writer->body["error_code"], 604);
  EXPECT_TRUE(engine_.submitted.empty());
}

}  // namespace
}  // namespace radixserve::api
