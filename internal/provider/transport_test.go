package provider

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gatehouse/internal/llm"
)

// The transport's buffers are 1 KiB each way; what is longer must still
// come through whole: a request body and header section, response
// headers, and a stream event several times the buffer's size, next to
// short ones.
func TestTransportCarriesWhatIsLongerThanItsBuffers(t *testing.T) {
	long := strings.Repeat("x", 5000)
	body := `{"prompt":"` + long + `"}`
	events := []string{`{"a":1}`, `{"long":"` + long + `"}`, `{"b":2}`}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ := io.ReadAll(r.Body)
		if string(got) != body || r.Header.Get("X-Long") != long {
			http.Error(w, "request changed on the way", http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Long-Answer", long)
		for _, e := range events {
			_, _ = io.WriteString(w, "data: "+e+"\n\n")
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	req, _ := http.NewRequest(http.MethodPost, up.URL, strings.NewReader(body))
	req.Header.Set("X-Long", long)
	resp, err := (&http.Client{Transport: NewTransport()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Long-Answer") != long {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, %d-byte header; %s", resp.StatusCode, len(resp.Header.Get("X-Long-Answer")), b)
	}
	r := llm.NewReader(resp.Body)
	for i, want := range events {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if string(ev.Data) != want {
			t.Fatalf("event %d: %d bytes, want %d", i, len(ev.Data), len(want))
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the events: %v, want EOF", err)
	}
}
