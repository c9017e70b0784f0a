package admin

import (
	"context"
	"errors"
	"fmt"

	"gatehouse/internal/auth"
)

// EnsureProjects makes sure a project exists for every name the config's
// keys belong to, so their keys can be listed under it and new keys
// created in it. A missing project is created read-only (the config owns
// it); an existing one, read-only or not, is left as it is. It returns
// the ID of each name.
//
// Replicas starting together may race to create the same project; the
// loser finds the winner's.
func EnsureProjects(ctx context.Context, st auth.Store, names []string) (map[string]string, error) {
	ids := make(map[string]string, len(names))
	for _, name := range names {
		if name == "" {
			continue
		}
		if _, ok := ids[name]; ok {
			continue
		}
		p, err := st.ProjectByName(ctx, name)
		if errors.Is(err, auth.ErrNotFound) {
			p = &auth.Project{Name: name, ReadOnly: true}
			err = st.CreateProject(ctx, p)
			if errors.Is(err, auth.ErrConflict) {
				p, err = st.ProjectByName(ctx, name)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("project %q of the config's keys: %w", name, err)
		}
		ids[name] = p.ID
	}
	return ids, nil
}
