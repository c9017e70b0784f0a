package admin

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"gatehouse/internal/auth"
	"gatehouse/internal/llm"
)

// CachePurger empties the response cache; *cache.Cache implements it.
type CachePurger interface {
	// Purge removes the entries of the project named project ("" all of
	// them) and reports how many went.
	Purge(ctx context.Context, project string) (int, error)
}

// purged answers DELETE /admin/cache.
type purged struct {
	Object  string `json:"object"` // always "cache.purge"
	Project string `json:"project,omitempty"`
	Deleted int    `json:"deleted"`
}

// purgeCache serves DELETE /admin/cache?project=: the entries of one
// project (by name or id) or, without project, of every project.
func (h *Handler) purgeCache(r *http.Request) (int, any, error) {
	if h.o.Cache == nil {
		return 0, nil, &llm.Error{Kind: llm.KindNotImplemented, Status: http.StatusNotImplemented, Type: "invalid_request_error",
			Code: "not_implemented", Message: "This gateway runs without a response cache (bare mode)."}
	}
	name := strings.TrimSpace(r.URL.Query().Get("project"))
	if r.URL.Query().Has("project") && name == "" {
		return 0, nil, llm.BadRequest("project", "invalid_project", "project: a project's name or id; leave it out to purge every project.")
	}
	if strings.HasPrefix(name, "proj_") {
		p, err := h.o.Store.Project(r.Context(), name)
		if errors.Is(err, auth.ErrNotFound) {
			return 0, nil, notFoundError("project", name)
		}
		if err != nil {
			return 0, nil, err
		}
		name = p.Name
	}
	n, err := h.o.Cache.Purge(r.Context(), name)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, purged{Object: "cache.purge", Project: name, Deleted: n}, nil
}
