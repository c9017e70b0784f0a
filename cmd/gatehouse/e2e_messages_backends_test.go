package main

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"gatehouse/internal/mockllm"
)

// The Anthropic Messages endpoint must work whatever serves the model.
// These tests drive /v1/messages with the official Anthropic SDK in front
// of each translating backend's emulator: the request goes Anthropic →
// canonical → provider, and the answer comes back provider → OpenAI
// chunks → Anthropic events.

type messagesBackend struct {
	name  string
	model string
	start func(t *testing.T) *testGateway
}

func messagesBackends() []messagesBackend {
	return []messagesBackend{
		{"anthropic", "chat", func(t *testing.T) *testGateway {
			return startGateway(t, anthropicConfig(startUpstream(t, mockllm.Options{})))
		}},
		{"gemini", "chat", func(t *testing.T) *testGateway {
			_, gw := startGemini(t, mockllm.Options{})
			return gw
		}},
		{"ollama", "local-chat", func(t *testing.T) *testGateway {
			_, gw := startOllama(t, mockllm.Options{})
			return gw
		}},
		{"bedrock", "chat", func(t *testing.T) *testGateway {
			_, gw := startBedrock(t, mockllm.Options{}, awsSecret)
			return gw
		}},
		{"azure", "chat", func(t *testing.T) *testGateway {
			return startGateway(t, azureConfig(startUpstream(t, mockllm.Options{})))
		}},
	}
}

func TestMessagesAcrossBackends(t *testing.T) {
	for _, b := range messagesBackends() {
		t.Run(b.name, func(t *testing.T) {
			gw := b.start(t)
			client := gw.messagesClient()
			ctx := context.Background()

			params := msgsUserTurn("Hello there")
			params.Model = anthropic.Model(b.model)
			msg, err := client.Messages.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if len(msg.Content) == 0 || msg.Content[len(msg.Content)-1].Type != "text" ||
				!strings.Contains(msg.Content[len(msg.Content)-1].Text, "Hello there") || msg.StopReason != anthropic.StopReasonEndTurn {
				t.Fatalf("message %s", msg.RawJSON())
			}
			if msg.Usage.InputTokens <= 0 || msg.Usage.OutputTokens <= 0 {
				t.Fatalf("usage %+v", msg.Usage)
			}

			// Streamed: the SDK's accumulator rebuilds the same answer,
			// with the real usage in message_delta.
			s := client.Messages.NewStreaming(ctx, params)
			acc := anthropic.Message{}
			for s.Next() {
				if err := acc.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if acc.Content[len(acc.Content)-1].Text != msg.Content[len(msg.Content)-1].Text || acc.StopReason != anthropic.StopReasonEndTurn {
				t.Fatalf("streamed %s, want the text of %s", acc.RawJSON(), msg.RawJSON())
			}
			if acc.Usage.OutputTokens != msg.Usage.OutputTokens {
				t.Fatalf("streamed output tokens %d, non-streamed %d", acc.Usage.OutputTokens, msg.Usage.OutputTokens)
			}

			// A tool loop: tool_use out, tool_result back, text answer.
			for _, streamed := range []bool{false, true} {
				tp := msgsUserTurn("Weather in Paris? @mock(tool=get_weather)")
				tp.Model = anthropic.Model(b.model)
				tp.Tools = []anthropic.ToolUnionParam{msgsWeatherTool()}
				var call *anthropic.Message
				if streamed {
					s := client.Messages.NewStreaming(ctx, tp)
					call = &anthropic.Message{}
					for s.Next() {
						if err := call.Accumulate(s.Current()); err != nil {
							t.Fatal(err)
						}
					}
					if err := s.Err(); err != nil {
						t.Fatal(err)
					}
				} else if call, err = client.Messages.New(ctx, tp); err != nil {
					t.Fatal(err)
				}
				var use *anthropic.ToolUseBlock
				for _, c := range call.Content {
					if c.Type == "tool_use" {
						u := c.AsToolUse()
						use = &u
					}
				}
				if call.StopReason != anthropic.StopReasonToolUse || use == nil || use.Name != "get_weather" || use.ID == "" ||
					!strings.Contains(string(use.Input), `"city"`) {
					t.Fatalf("streamed=%v: tool call %s", streamed, call.RawJSON())
				}
				tp.Messages = append(tp.Messages, call.ToParam(),
					anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, `{"temp_c": 21}`, false)))
				final, err := client.Messages.New(ctx, tp)
				if err != nil {
					t.Fatalf("streamed=%v: tool result turn: %v", streamed, err)
				}
				if final.StopReason != anthropic.StopReasonEndTurn || final.Content[len(final.Content)-1].Type != "text" {
					t.Fatalf("streamed=%v: final %s", streamed, final.RawJSON())
				}
			}
		})
	}
}
