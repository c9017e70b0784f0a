package mockllm

import (
	"reflect"
	"testing"
)

// commonChats are requests parseCommonChat must read itself.
var commonChats = []string{
	`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Summarise the trade-offs of running an LLM gateway."}]}`,
	`{"model":"m","stream":true,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"hi"}]}`,
	`{"model":"m","stream":false,"max_tokens":3,"messages":[{"role":"user","content":"one two three four five"}]}`,
	`{"model":"m","max_tokens":9,"max_completion_tokens":2,"messages":[{"role":"user","content":"a b c d"}]}`,
	`{"model":"m","max_tokens":null,"messages":[{"role":"user","content":"héllo wörld"}]}`,
	`{"model":"m","max_tokens":-4,"messages":[{"role":"user","content":"a b"}]}`,
	` { "messages" : [ {"content":null,"role":"assistant","tool_calls":[{"id":"c"}]}, {"role":"tool","content":"ok","tool_call_id":"c"} ] , "model" : "m" } `,
	`{"model":"m","temperature":0.2,"top_p":1,"seed":7,"user":"u","metadata":{"a":"b"},"tools":[{"type":"function"}],"messages":[{"role":"user","content":"hi","name":"me"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"@mock(latency=5ms) hello"}]}`,
	`{"model":"m","messages":[{"role":"developer","content":""}]}`,
}

// uncommonChats are requests parseCommonChat must leave to decodeChat:
// errors, and what the decoder reads differently from their bytes.
var uncommonChats = []string{
	`{"model":"m",`,
	``,
	`[1,2]`,
	`{"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":4,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m"}`,
	`{"model":"m","messages":null}`,
	`{"model":"m","messages":[]}`,
	`{"model":"m","messages":"hi"}`,
	`{"model":"m","messages":[{"role":"user","content":"a"},"hi"]}`,
	`{"model":"m","messages":[{"content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"robot","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":7,"content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"user","content":7}]}`,
	`{"model":"m","stream":"yes","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","stream":null,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"gpt-4o","top_k":40,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"o3","reasoning_effort":"low","messages":[{"role":"user","content":"hi"}]}`,
	`{"Model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"a","model":"b","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m\u0031","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"line\nbreak"}]}`,
	"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"bad \xff byte\"}]}",
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
	`{"model":"m","messages":[{"role":"user","Role":"system","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"a","content":"b"}]}`,
	`{"model":"m","max_tokens":1.0,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","max_tokens":99999999999999999999,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}]} trailing`,
}

// TestCommonChatRequestsSkipTheDecoder: the common requests are read
// without encoding/json, into what the decoder makes of them.
func TestCommonChatRequestsSkipTheDecoder(t *testing.T) {
	s := New(Options{})
	for _, body := range commonChats {
		x, lastUser, ok := s.parseCommonChat([]byte(body))
		if !ok {
			t.Errorf("declined: %s", body)
			continue
		}
		want, wantUser, err := s.decodeChat([]byte(body))
		if err != nil {
			t.Errorf("the decoder refuses what the scanner took: %s: %s", err.message, body)
			continue
		}
		if !reflect.DeepEqual(x, want) || lastUser != wantUser {
			t.Errorf("for %s\nscanner %+v %q\ndecoder %+v %q", body, x, lastUser, want, wantUser)
		}
	}
}

// TestUncommonChatRequestsGoToTheDecoder: errors, and bodies the decoder
// reads otherwise than their bytes say, are the decoder's to decide.
func TestUncommonChatRequestsGoToTheDecoder(t *testing.T) {
	s := New(Options{})
	for _, body := range uncommonChats {
		if x, _, ok := s.parseCommonChat([]byte(body)); ok {
			t.Errorf("read %+v from %s", x, body)
		}
	}
}

// FuzzCommonChatAgreesWithDecoder: whatever parseCommonChat reads, the
// decoder accepts and reads the same way.
func FuzzCommonChatAgreesWithDecoder(f *testing.F) {
	for _, body := range append(append([]string(nil), commonChats...), uncommonChats...) {
		f.Add([]byte(body))
	}
	s := New(Options{})
	f.Fuzz(func(t *testing.T, body []byte) {
		x, lastUser, ok := s.parseCommonChat(body)
		if !ok {
			return
		}
		want, wantUser, err := s.decodeChat(body)
		if err != nil {
			t.Fatalf("the decoder refuses what the scanner took: %s: %q", err.message, body)
		}
		if !reflect.DeepEqual(x, want) || lastUser != wantUser {
			t.Fatalf("for %q\nscanner %+v %q\ndecoder %+v %q", body, x, lastUser, want, wantUser)
		}
	})
}

// TestReplyFollowsThePrompt: the kept reply answers only the message it
// was made for.
func TestReplyFollowsThePrompt(t *testing.T) {
	s := New(Options{})
	for _, said := range []string{"first words", "second words here", "first words"} {
		reply, cuts := s.replyFor(said)
		if want := defaultReply(said); reply != want {
			t.Errorf("reply to %q is %q, want %q", said, reply, want)
		}
		if want := tokenCuts(reply); !reflect.DeepEqual(cuts, want) {
			t.Errorf("cuts of %q are %v, want %v", reply, cuts, want)
		}
	}
}
