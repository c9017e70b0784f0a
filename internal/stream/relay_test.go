package stream

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gatehouse/internal/llm"
)

// fakeStream replays chunks, then err (io.EOF for a clean end).
type fakeStream struct {
	chunks []llm.Chunk
	err    error
	closed bool
}

func (f *fakeStream) Next() (llm.Chunk, error) {
	if len(f.chunks) == 0 {
		return llm.Chunk{}, f.err
	}
	c := f.chunks[0]
	f.chunks = f.chunks[1:]
	return c, nil
}

func (f *fakeStream) Close() error { f.closed = true; return nil }

var usage = llm.Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7}

func chunks() []llm.Chunk {
	return []llm.Chunk{
		{Data: []byte(`{"n":1}`)},
		{Data: []byte(`{"n":2}`)},
		{Data: []byte(`{"choices":[],"usage":{}}`), Usage: &usage, UsageOnly: true},
	}
}

func TestRelayWithholdsUsageChunkUnlessAsked(t *testing.T) {
	for _, include := range []bool{false, true} {
		rec := httptest.NewRecorder()
		events := 0
		res, err := Relay(rec, &fakeStream{chunks: chunks(), err: io.EOF}, Options{IncludeUsage: include, OnChunk: func() { events++ }})
		if err != nil {
			t.Fatal(err)
		}
		want := "data: {\"n\":1}\n\ndata: {\"n\":2}\n\n"
		if include {
			want += "data: {\"choices\":[],\"usage\":{}}\n\n"
		}
		want += "data: [DONE]\n\n"
		if rec.Body.String() != want {
			t.Errorf("include=%v body:\n%q\nwant\n%q", include, rec.Body.String(), want)
		}
		if !res.HasUsage || res.Usage != usage || !res.Done || events != 3 {
			t.Errorf("include=%v result %+v events %d", include, res, events)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") || !rec.Flushed {
			t.Errorf("content type %q flushed %v", ct, rec.Flushed)
		}
	}
}

func TestRelayErrorBeforeFirstChunkWritesNothing(t *testing.T) {
	rec := httptest.NewRecorder()
	boom := &llm.Error{Kind: llm.KindUpstreamStatus, Status: 503, Message: "down"}
	res, err := Relay(rec, &fakeStream{err: boom}, Options{})
	if !errors.Is(err, boom) || res.Started {
		t.Fatalf("err %v started %v", err, res.Started)
	}
	if rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
		t.Fatalf("wrote %q before any chunk", rec.Body.String())
	}
}

func TestRelayErrorMidStreamBecomesErrorEvent(t *testing.T) {
	rec := httptest.NewRecorder()
	res, err := Relay(rec, &fakeStream{chunks: chunks()[:1], err: io.ErrUnexpectedEOF}, Options{})
	if err == nil || !res.Started || res.Done {
		t.Fatalf("err %v result %+v", err, res)
	}
	body := rec.Body.String()
	if !strings.HasPrefix(body, "data: {\"n\":1}\n\n") || !strings.Contains(body, `"code":"upstream_stream_broken"`) || strings.Contains(body, "[DONE]") {
		t.Fatalf("body %q", body)
	}
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
}
