package stream

import (
	"errors"
	"io"
	"net/http/httptest"
	"testing"

	"gatehouse/internal/llm"
)

// upper is a toy dialect: it holds usage-only chunks back, writes other
// chunks as "x:<data>" lines, and closes with "end".
type upper struct{}

func (upper) Chunk(b []byte, c llm.Chunk) ([]byte, error) {
	if string(c.Data) == "bad" {
		return b, errors.New("bad chunk")
	}
	if c.UsageOnly {
		return b, nil
	}
	return append(append(append(b, "x:"...), c.Data...), '\n'), nil
}
func (upper) End(b []byte) []byte                 { return append(b, "end\n"...) }
func (upper) Error(b []byte, e *llm.Error) []byte { return append(b, "err:"+e.Message+"\n"...) }

func TestRelayWithEncoder(t *testing.T) {
	rec := httptest.NewRecorder()
	res, err := Relay(rec, &fakeStream{chunks: chunks(), err: io.EOF}, Options{Encoder: upper{}, IncludeUsage: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rec.Body.String(), "x:{\"n\":1}\nx:{\"n\":2}\nend\n"; got != want {
		t.Fatalf("body %q want %q", got, want)
	}
	if !res.Done || !res.HasUsage || res.Usage != usage || res.Chunks != 2 {
		t.Fatalf("result %+v", res)
	}

	// Nothing is written until the encoder has something to write: a
	// failure before that leaves the caller free to answer with a status.
	rec = httptest.NewRecorder()
	boom := errors.New("boom")
	res, err = Relay(rec, &fakeStream{chunks: []llm.Chunk{{Data: []byte("{}"), Usage: &usage, UsageOnly: true}}, err: boom}, Options{Encoder: upper{}})
	if !errors.Is(err, boom) || res.Started || rec.Body.Len() != 0 {
		t.Fatalf("early failure: %v %+v %q", err, res, rec.Body.String())
	}

	// After the start, an encoder error ends the stream with its error event.
	rec = httptest.NewRecorder()
	res, err = Relay(rec, &fakeStream{chunks: []llm.Chunk{{Data: []byte("ok")}, {Data: []byte("bad")}}, err: io.EOF},
		Options{Encoder: upper{}, Classify: func(err error) *llm.Error { return &llm.Error{Status: 502, Message: err.Error()} }})
	if err == nil || !res.Started || res.Done || rec.Body.String() != "x:ok\nerr:bad chunk\n" {
		t.Fatalf("encoder failure: %v %+v %q", err, res, rec.Body.String())
	}
}
