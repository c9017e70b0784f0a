package llm

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNewCompletionSlot: the slot NewCompletion returns is the one the
// gateway's walk of the body finds, so the cost set through it gives the
// very bytes the walk would; with a fingerprint after the usage (escaped
// as encoding/json escapes it), with "usage" inside the answer's text, and
// with the details objects.
func TestNewCompletionSlot(t *testing.T) {
	text := `he said "usage":{} twice: "usage":{`
	for _, c := range []ChatCompletion{
		{ID: "a", Model: "m", Usage: &WireUsage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}},
		{ID: "b", Model: "m", Choices: []Choice{{Message: ResponseMessage{Content: &text}, FinishReason: "stop"}},
			Usage: Usage{PromptTokens: 10, CompletionTokens: 5, CachedTokens: 4, ReasoningTokens: 2}.Wire()},
		{ID: "c", Model: "m", SystemFingerprint: "fp_<&>\u2028é", Usage: &WireUsage{PromptTokens: 7}},
		{ID: "d", Model: "m", Choices: []Choice{{Message: ResponseMessage{Content: &text}}}, SystemFingerprint: `"usage":{`,
			Usage: &WireUsage{CompletionTokens: 9}},
	} {
		want, err := json.Marshal(withDefaults(c))
		if err != nil {
			t.Fatal(err)
		}
		got, err := NewCompletion(&c)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Body) != string(want) {
			t.Fatalf("%s: body\n%s\nwant\n%s", c.ID, got.Body, want)
		}
		_, _, walked, err := CheckUsage(got.Body)
		if err != nil || walked.End == 0 {
			t.Fatalf("%s: the walk finds no usage object (%v) in %s", c.ID, err, got.Body)
		}
		if d := cmp.Diff(walked, got.Slot); d != "" {
			t.Errorf("%s: slot (-walked +returned):\n%s", c.ID, d)
		}
		cost, _ := SetUsageCost(got.Body, "0.25")
		if at := SetUsageCostAt(got.Body, got.Slot, "0.25"); string(at) != string(cost) {
			t.Errorf("%s: cost set through the slot:\n%s\nwant\n%s", c.ID, at, cost)
		}
	}
	c, err := NewCompletion(&ChatCompletion{ID: "none", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Slot != (UsageSlot{}) {
		t.Errorf("no usage, yet a slot %+v", c.Slot)
	}
}

// withDefaults is c as NewCompletion fills it in before encoding.
func withDefaults(c ChatCompletion) ChatCompletion {
	c.Object = "chat.completion"
	c.Choices = append([]Choice(nil), c.Choices...)
	for i := range c.Choices {
		c.Choices[i].Message.Role = RoleAssistant
		c.Choices[i].Logprobs = json.RawMessage("null")
	}
	return c
}
