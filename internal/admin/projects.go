package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"gatehouse/internal/auth"
	"gatehouse/internal/llm"
)

// projectIDPrefix starts every stored project ID; names may not, so a
// path or filter that takes "ID or name" is never ambiguous.
const projectIDPrefix = "proj_"

var projectFields = []field[auth.Project]{
	{name: "name", set: func(p *auth.Project, v json.RawMessage) error {
		if err := setString(&p.Name, v, false); err != nil {
			return err
		}
		return validName(p.Name)
	}},
	{name: "rpm", set: func(p *auth.Project, v json.RawMessage) error { return setCount(&p.RPM, v) }},
	{name: "tpm", set: func(p *auth.Project, v json.RawMessage) error { return setCount(&p.TPM, v) }},
	{name: "budget", set: func(p *auth.Project, v json.RawMessage) error { return setBudget(&p.Budget, v) }},
	{name: "models", set: func(p *auth.Project, v json.RawMessage) error { return setList(&p.Models, v) }},
	{name: "providers", set: func(p *auth.Project, v json.RawMessage) error { return setList(&p.Providers, v) }},
	{name: "labels", set: func(p *auth.Project, v json.RawMessage) error { return setLabels(&p.Labels, v) }},
	{name: "cache", set: func(p *auth.Project, v json.RawMessage) error { return setProjectCache(&p.Cache, v) }},
	{name: "log_bodies", set: func(p *auth.Project, v json.RawMessage) error { return setBool(&p.LogBodies, v) }},
}

// validName checks a project name: short, printable, URL-safe, and never
// shaped like an ID.
func validName(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(s) > 64 {
		return errors.New("must be at most 64 characters")
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("may hold only letters, digits, '-', '_' and '.', not %q", c)
		}
	}
	if strings.HasPrefix(s, projectIDPrefix) {
		return fmt.Errorf("must not begin with %q, which starts project IDs", projectIDPrefix)
	}
	return nil
}

func (h *Handler) createProject(r *http.Request) (int, any, error) {
	obj, err := object(r)
	if err != nil {
		return 0, nil, err
	}
	if _, ok := obj["name"]; !ok {
		return 0, nil, llm.BadRequest("name", "missing_field", "name: required.")
	}
	var p auth.Project
	if err := apply(projectFields, obj, &p, true); err != nil {
		return 0, nil, err
	}
	if err := h.checkSemantic(p.Cache); err != nil {
		return 0, nil, err
	}
	if _, ok := obj["models"]; ok {
		if err := h.checkServed("models", p.Models); err != nil {
			return 0, nil, err
		}
	}
	if _, ok := obj["providers"]; ok {
		if err := h.checkProviders(p.Providers); err != nil {
			return 0, nil, err
		}
	}
	if err := h.o.Store.CreateProject(r.Context(), &p); err != nil {
		if errors.Is(err, auth.ErrConflict) {
			return 0, nil, conflictError("name", "duplicate_name", "name: a project named "+quote(p.Name)+" already exists.")
		}
		return 0, nil, err
	}
	return http.StatusCreated, h.projectView(r, &p), nil
}

func (h *Handler) listProjects(r *http.Request) (int, any, error) {
	pg, err := page(r)
	if err != nil {
		return 0, nil, err
	}
	limit := pg.Limit
	pg.Limit++
	ps, err := h.o.Store.Projects(r.Context(), pg)
	if err != nil {
		return 0, nil, err
	}
	l := newList(ps, limit, func(p *auth.Project) string { return p.ID })
	return http.StatusOK, viewList(l, func(ps []auth.Project) []projectView { return h.projectViews(r, ps) }), nil
}

// project finds the project a path or filter names, by ID or by name.
// param is what to blame when it is not found: "" for the path (404),
// else the field or query parameter (400).
func (h *Handler) project(ctx context.Context, ref, param string) (*auth.Project, error) {
	var p *auth.Project
	var err error
	if strings.HasPrefix(ref, projectIDPrefix) {
		p, err = h.o.Store.Project(ctx, ref)
	} else {
		p, err = h.o.Store.ProjectByName(ctx, ref)
	}
	if errors.Is(err, auth.ErrNotFound) {
		if param == "" {
			return nil, notFoundError("project", ref)
		}
		return nil, llm.BadRequest(param, "unknown_project", "%s: no project %s (give a project ID or name).", param, quote(ref))
	}
	return p, err
}

func (h *Handler) getProject(r *http.Request) (int, any, error) {
	p, err := h.project(r.Context(), r.PathValue("id"), "")
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, h.projectView(r, p), nil
}

func (h *Handler) updateProject(r *http.Request) (int, any, error) {
	p, err := h.project(r.Context(), r.PathValue("id"), "")
	if err != nil {
		return 0, nil, err
	}
	if p.ReadOnly {
		return 0, nil, readOnlyError("project", p.Name)
	}
	obj, err := object(r)
	if err != nil {
		return 0, nil, err
	}
	if err := apply(projectFields, obj, p, false); err != nil {
		return 0, nil, err
	}
	if err := h.checkSemantic(p.Cache); err != nil {
		return 0, nil, err
	}
	if _, ok := obj["models"]; ok {
		if err := h.checkServed("models", p.Models); err != nil {
			return 0, nil, err
		}
	}
	if _, ok := obj["providers"]; ok {
		if err := h.checkProviders(p.Providers); err != nil {
			return 0, nil, err
		}
	}
	if err := h.o.Store.UpdateProject(r.Context(), p); err != nil {
		switch {
		case errors.Is(err, auth.ErrConflict):
			return 0, nil, conflictError("name", "duplicate_name", "name: a project named "+quote(p.Name)+" already exists.")
		case errors.Is(err, auth.ErrNotFound):
			return 0, nil, notFoundError("project", r.PathValue("id"))
		}
		return 0, nil, err
	}
	return http.StatusOK, h.projectView(r, p), nil
}

func (h *Handler) deleteProject(r *http.Request) (int, any, error) {
	p, err := h.project(r.Context(), r.PathValue("id"), "")
	if err != nil {
		return 0, nil, err
	}
	if p.ReadOnly {
		return 0, nil, readOnlyError("project", p.Name)
	}
	for _, k := range h.o.Static {
		if k.ProjectID == p.ID {
			return 0, nil, conflictError("", "project_has_active_keys",
				"The project "+quote(p.Name)+" has keys in the config file; remove them there first.")
		}
	}
	switch err := h.o.Store.DeleteProject(r.Context(), p.ID); {
	case errors.Is(err, auth.ErrInUse):
		return 0, nil, conflictError("", "project_has_active_keys",
			"The project "+quote(p.Name)+" still has active keys; revoke them first (DELETE /admin/keys/{id}).")
	case errors.Is(err, auth.ErrNotFound):
		return 0, nil, notFoundError("project", r.PathValue("id"))
	case err != nil:
		return 0, nil, err
	}
	return http.StatusOK, deleted{ID: p.ID, Object: "project", Deleted: true}, nil
}

// checkSemantic refuses turning the semantic cache on for a project when
// the gateway has no embedder to run it (cache.semantic.embedder).
func (h *Handler) checkSemantic(c *auth.ProjectCache) error {
	if c != nil && c.Semantic.Enabled != nil && *c.Semantic.Enabled && !h.o.Semantic {
		return llm.BadRequest("cache", "semantic_unavailable",
			"cache: the semantic cache needs an embedder in the gateway's config (cache.semantic.embedder); none is set.")
	}
	return nil
}
