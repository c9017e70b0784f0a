package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/auth"
	"gatehouse/internal/testservers"
)

// TestUnavailableMarksServerDown: while the server is stopped or crashed,
// the store's calls fail with auth.ErrUnavailable (what the admin API
// answers 503 to); a statement the server refuses is not marked; and
// once the server is back the same Store works again.
func TestUnavailableMarksServerDown(t *testing.T) {
	pg := testservers.StartPostgres(t)
	ctx := context.Background()
	s := openTest(t, pg.DSN())
	defer s.Close()
	if err := s.CreateProject(ctx, &auth.Project{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	err := s.CreateProject(ctx, &auth.Project{Name: "a"})
	if !errors.Is(err, auth.ErrConflict) || errors.Is(err, auth.ErrUnavailable) {
		t.Fatalf("duplicate name: %v; want ErrConflict only", err)
	}
	err = s.withConn(ctx, func(c *pgx.Conn) error { _, err := c.Exec(ctx, `SELECT * FROM no_such_table`); return err })
	if err == nil || errors.Is(err, auth.ErrUnavailable) {
		t.Fatalf("a bad statement: %v; want an error not marked unavailable", err)
	}
	for name, stop := range map[string]func() error{"stopped": pg.Stop, "crashed": pg.Kill} {
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Projects(ctx, auth.Page{}); !errors.Is(err, auth.ErrUnavailable) {
			t.Errorf("%s: list: %v; want ErrUnavailable", name, err)
		}
		if err := s.CreateProject(ctx, &auth.Project{Name: "b-" + name}); !errors.Is(err, auth.ErrUnavailable) {
			t.Errorf("%s: create: %v; want ErrUnavailable", name, err)
		}
		if err := pg.Start(); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateProject(ctx, &auth.Project{Name: "c-" + name}); err != nil {
			t.Errorf("%s, then back: %v", name, err)
		}
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Projects(canceled, auth.Page{}); err == nil || errors.Is(err, auth.ErrUnavailable) {
		t.Errorf("a canceled call: %v; want the cancellation, not ErrUnavailable", err)
	}
}
