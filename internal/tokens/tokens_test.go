package tokens

import (
	"encoding/json"
	"testing"

	"gatehouse/internal/llm"
)

func TestCount(t *testing.T) {
	c := New()
	cases := []struct {
		text string
		want int
	}{
		{"", 0},
		{"hello", 1},
		{"Hello, world!", 4},
		{"The quick brown fox jumps over the lazy dog.", 10},
	}
	for _, tc := range cases {
		if got := c.Count(tc.text); got != tc.want {
			t.Errorf("Count(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

func TestChat(t *testing.T) {
	c := New()
	base := &llm.ChatParams{Messages: []llm.Message{{Role: "user", Content: []llm.Part{{Type: llm.PartText, Text: "hello"}}}}}
	// priming + overhead + "user" + "hello"
	if got, want := c.Chat(base), ReplyPriming+MessageOverhead+1+1; got != want {
		t.Fatalf("plain: got %d want %d", got, want)
	}
	withAll := &llm.ChatParams{
		Messages: []llm.Message{
			{Role: "system", Content: []llm.Part{{Type: llm.PartText, Text: "Be brief."}}},
			{Role: "user", Content: []llm.Part{{Type: llm.PartText, Text: "hello"}, {Type: llm.PartImageURL, ImageURL: "data:image/png;base64,AAAA"}}},
			{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
			{Role: "tool", ToolCallID: "c1", Content: []llm.Part{{Type: llm.PartText, Text: "sunny"}}},
		},
		Tools: []llm.Tool{{Name: "get_weather", Description: "Weather by city", Parameters: json.RawMessage(`{"type":"object"}`)}},
	}
	got := c.Chat(withAll)
	// Each added piece must raise the count; the image alone adds its allowance.
	if got <= c.Chat(base)+ImageTokens+ToolOverhead {
		t.Fatalf("full prompt counted %d, too low", got)
	}
	noImage := *withAll
	noImage.Messages = append([]llm.Message(nil), withAll.Messages...)
	noImage.Messages[1].Content = noImage.Messages[1].Content[:1]
	if d := got - c.Chat(&noImage); d != ImageTokens {
		t.Fatalf("image adds %d, want %d", d, ImageTokens)
	}
}
