package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gatehouse/internal/mockllm"
)

// streamBackend is one provider type behind the gateway, for the stream
// checks every provider must pass through the official SDK.
type streamBackend struct {
	name  string
	model string // the gateway's model served by this provider
	start func(t *testing.T, o mockllm.Options) (*upstream, *testGateway)
	// streamed checks, when set, the upstream request a stream sent: the
	// provider's own streaming endpoint or flag.
	streamed func(t *testing.T, up *upstream)
}

func streamBackends() []streamBackend {
	withConfig := func(config func(*upstream) string) func(*testing.T, mockllm.Options) (*upstream, *testGateway) {
		return func(t *testing.T, o mockllm.Options) (*upstream, *testGateway) {
			up := startUpstream(t, o)
			return up, startGateway(t, config(up))
		}
	}
	return []streamBackend{
		{name: "openai", model: "chat", start: withConfig(func(up *upstream) string { return baseConfig(up, "") }),
			streamed: func(t *testing.T, up *upstream) {
				// The gateway asks upstream for usage whether the client did or not.
				if rec := lastUpstream(t, up); !strings.Contains(string(rec.Body), `"include_usage":true`) {
					t.Fatalf("upstream was not asked for usage: %s", rec.Body)
				}
			}},
		{name: "anthropic", model: "chat", start: withConfig(anthropicConfig)},
		{name: "azure", model: "chat", start: withConfig(azureConfig)},
		{name: "bedrock", model: "chat", start: func(t *testing.T, o mockllm.Options) (*upstream, *testGateway) {
			return startBedrock(t, o, awsSecret)
		}, streamed: func(t *testing.T, up *upstream) {
			if rec := lastUpstream(t, up); !strings.HasSuffix(rec.Path, "/converse-stream") {
				t.Fatalf("upstream path %s", rec.Path)
			}
		}},
		{name: "gemini", model: "chat", start: startGemini, streamed: func(t *testing.T, up *upstream) {
			if rec := lastUpstream(t, up); rec.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" {
				t.Fatalf("upstream path %s", rec.Path)
			}
		}},
		{name: "ollama", model: "local-chat", start: startOllama, streamed: func(t *testing.T, up *upstream) {
			if _, body := lastOllamaRequest(t, up, "/api/chat"); body["stream"] != true {
				t.Fatalf("upstream stream flag %v", body["stream"])
			}
		}},
	}
}

// TestSDKStreamOnEveryProvider streams through openai-go from each
// provider type, with and without include_usage, and holds every one to
// the same contract: the stream is relayed piece by piece and assembles
// into the non-streamed answer, finishing with "stop"; usage comes in one
// chunk without choices exactly when the client asked for it, equal to
// the non-streamed usage; and the gateway logs the real usage either way.
func TestSDKStreamOnEveryProvider(t *testing.T) {
	for _, b := range streamBackends() {
		t.Run(b.name, func(t *testing.T) {
			up, gw := b.start(t, mockllm.Options{Chunks: 5})
			client := gw.client()
			ctx := context.Background()
			ask := func() openai.ChatCompletionNewParams {
				p := userMessage("stream me please")
				p.Model = b.model
				return p
			}
			whole, err := client.Chat.Completions.New(ctx, ask())
			if err != nil {
				t.Fatal(err)
			}
			if whole.Usage.TotalTokens == 0 {
				t.Fatalf("the whole answer reports no usage: %+v", whole.Usage)
			}
			for _, includeUsage := range []bool{false, true} {
				params := ask()
				if includeUsage {
					params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				}
				var resp *http.Response
				stream := client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&resp))
				acc := openai.ChatCompletionAccumulator{}
				chunks, usageChunks := 0, 0
				for stream.Next() {
					c := stream.Current()
					acc.AddChunk(c)
					chunks++
					if !includeUsage && strings.Contains(c.RawJSON(), `"usage"`) {
						t.Fatalf("the client did not ask for usage but a chunk carries it: %s", c.RawJSON())
					}
					if strings.Contains(c.RawJSON(), `"usage":{`) {
						usageChunks++
						if len(c.Choices) != 0 {
							t.Errorf("include_usage=%v: usage on a chunk with choices: %s", includeUsage, c.RawJSON())
						}
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				if chunks < 5 {
					t.Fatalf("include_usage=%v: %d chunks: the stream was not relayed piece by piece", includeUsage, chunks)
				}
				if len(acc.Choices) == 0 || acc.Choices[0].Message.Content != whole.Choices[0].Message.Content || acc.Choices[0].FinishReason != "stop" {
					t.Fatalf("include_usage=%v: streamed %+v, whole %q", includeUsage, acc.Choices, whole.Choices[0].Message.Content)
				}
				if want := map[bool]int{false: 0, true: 1}[includeUsage]; usageChunks != want {
					t.Fatalf("include_usage=%v: %d usage chunks, want %d", includeUsage, usageChunks, want)
				}
				if includeUsage && (acc.Usage.TotalTokens != whole.Usage.TotalTokens || acc.Usage.TotalTokens != acc.Usage.PromptTokens+acc.Usage.CompletionTokens) {
					t.Fatalf("stream usage %+v, whole %+v", acc.Usage, whole.Usage)
				}
				// Hidden from the client or not, the gateway knows the real usage.
				line := gw.logLine(t, resp.Header.Get("X-Gatehouse-Request-Id"))
				if !strings.Contains(line, `"total_tokens":`+strconv.Itoa(int(whole.Usage.TotalTokens))) || !strings.Contains(line, `"ttft_ms":`) {
					t.Fatalf("include_usage=%v: log line lacks usage %d or ttft: %s", includeUsage, whole.Usage.TotalTokens, line)
				}
				if b.streamed != nil {
					b.streamed(t, up)
				}
			}
		})
	}
}
