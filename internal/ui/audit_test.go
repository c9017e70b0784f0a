package ui

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/audit"
)

// memAudit keeps entries in memory.
type memAudit struct {
	mu      sync.Mutex
	entries []audit.Entry
}

func (m *memAudit) AppendAudit(_ context.Context, e *audit.Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries = append(m.entries, *e)
	return nil
}

func (m *memAudit) CompleteAudit(context.Context, *audit.Entry) error { return nil }

func (m *memAudit) Audit(context.Context, audit.Query) ([]audit.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]audit.Entry(nil), m.entries...), nil
}

// Logins, failed ones coalesced per address and minute, and logouts are
// in the audit log; what a failed login typed is not.
func TestLoginsAndLogoutsAreAudited(t *testing.T) {
	e := newEnv(t)
	log := &memAudit{}
	e.h.o.Audit = log
	const guess = "gh-a-guessed-admin-key"
	for i := 0; i < 3; i++ {
		if w := do(e.h, loginRequest(guess)); w.Code != http.StatusUnauthorized {
			t.Fatalf("wrong key: %d", w.Code)
		}
	}
	e.clock.add(time.Minute)
	c, csrf := e.login(t)
	r := httptest.NewRequest(http.MethodPost, "http://gw.test/ui/api/logout", nil)
	r.AddCookie(c)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	r.Header.Set("Origin", "http://gw.test")
	r.Header.Set(CSRFHeader, csrf)
	if w := do(e.h, r); w.Code != http.StatusNoContent {
		t.Fatalf("logout: %d %s", w.Code, w.Body)
	}
	e.clock.add(time.Minute)
	if w := do(e.h, loginRequest(guess)); w.Code != http.StatusUnauthorized {
		t.Fatalf("wrong key: %d", w.Code)
	}

	type row struct {
		Actor, Role, Path, ObjectType string
		Status                        int
		After                         string
	}
	var got []row
	for _, en := range log.entries {
		if en.Method != http.MethodPost || en.Time.IsZero() {
			t.Errorf("entry %+v: want a POST with its time", en)
		}
		if strings.Contains(string(en.After), guess) {
			t.Errorf("entry %+v holds the key typed", en)
		}
		got = append(got, row{en.Actor, en.Role, en.Path, en.ObjectType, en.Status, string(en.After)})
	}
	want := []row{
		{"unknown", "", "/ui/api/login", "session", 401, `{"refused":"invalid_admin_key","source":"192.0.2.1"}`},
		{"admin", "admin", "/ui/api/login", "session", 200, ""},
		{"session:admin", "admin", "/ui/api/logout", "session", 204, ""},
		{"unknown", "", "/ui/api/login", "session", 401, `{"refused":"invalid_admin_key","source":"192.0.2.1","not_recorded_before":2}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit entries (-want +got):\n%s", diff)
	}
}
