package admin

import (
	"encoding/json"
	"errors"
	"net/http"

	"gatehouse/internal/auth"
	"gatehouse/internal/llm"
)

var customerFields = []field[auth.Customer]{
	{name: "external_id", set: func(c *auth.Customer, v json.RawMessage) error {
		if err := setString(&c.ExternalID, v, false); err != nil {
			return err
		}
		if c.ExternalID == "" {
			return errors.New("must not be empty")
		}
		return nil
	}},
	{name: "name", set: func(c *auth.Customer, v json.RawMessage) error { return setString(&c.Name, v, true) }},
	{name: "daily_usd", set: func(c *auth.Customer, v json.RawMessage) error { return setUSD(&c.DailyUSD, v) }},
	{name: "monthly_usd", set: func(c *auth.Customer, v json.RawMessage) error { return setUSD(&c.MonthlyUSD, v) }},
	{name: "on_exceed", set: func(c *auth.Customer, v json.RawMessage) error {
		if isNull(v) {
			c.OnExceed = auth.OnExceedBlock
			return nil
		}
		if err := setString(&c.OnExceed, v, false); err != nil {
			return err
		}
		if c.OnExceed != auth.OnExceedBlock && c.OnExceed != auth.OnExceedDowngrade {
			return errors.New(`must be "block" or "downgrade", not ` + quote(c.OnExceed))
		}
		return nil
	}},
	{name: "downgrade_model", set: func(c *auth.Customer, v json.RawMessage) error { return setString(&c.DowngradeModel, v, true) }},
	{name: "labels", set: func(c *auth.Customer, v json.RawMessage) error { return setLabels(&c.Labels, v) }},
}

// checkCustomer holds what no single field can: a customer downgraded
// when over budget needs a model to be downgraded to.
func checkCustomer(c *auth.Customer) error {
	if c.OnExceed == auth.OnExceedDowngrade && c.DowngradeModel == "" {
		return llm.BadRequest("downgrade_model", "missing_field", `downgrade_model: required when on_exceed is "downgrade".`)
	}
	return nil
}

func duplicateCustomer(c *auth.Customer) error {
	return conflictError("external_id", "duplicate_external_id",
		"external_id: the project already has a customer "+quote(c.ExternalID)+".")
}

func (h *Handler) createCustomer(r *http.Request) (int, any, error) {
	obj, err := object(r)
	if err != nil {
		return 0, nil, err
	}
	ref, err := projectRef(obj)
	if err != nil {
		return 0, nil, err
	}
	if _, ok := obj["external_id"]; !ok {
		return 0, nil, llm.BadRequest("external_id", "missing_field", "external_id: required (the x-gatehouse-customer header or user field that names the customer).")
	}
	c := auth.Customer{OnExceed: auth.OnExceedBlock}
	if err := apply(customerFields, obj, &c, true); err != nil {
		return 0, nil, err
	}
	if err := checkCustomer(&c); err != nil {
		return 0, nil, err
	}
	p, err := h.project(r.Context(), ref, "project")
	if err != nil {
		return 0, nil, err
	}
	c.ProjectID = p.ID
	if err := h.o.Store.CreateCustomer(r.Context(), &c); err != nil {
		switch {
		case errors.Is(err, auth.ErrConflict):
			return 0, nil, duplicateCustomer(&c)
		case errors.Is(err, auth.ErrNotFound):
			return 0, nil, llm.BadRequest("project", "unknown_project", "project: no project %s.", quote(ref))
		}
		return 0, nil, err
	}
	return http.StatusCreated, h.customerView(r, &c), nil
}

func (h *Handler) listCustomers(r *http.Request) (int, any, error) {
	pg, limit, projectID, err := h.projectPage(r)
	if err != nil {
		return 0, nil, err
	}
	cs, err := h.o.Store.Customers(r.Context(), projectID, pg)
	if err != nil {
		return 0, nil, err
	}
	l := newList(cs, limit, func(c *auth.Customer) string { return c.ID })
	return http.StatusOK, viewList(l, func(cs []auth.Customer) []customerView { return h.customerViews(r, cs) }), nil
}

func (h *Handler) customer(r *http.Request) (*auth.Customer, error) {
	id := r.PathValue("id")
	c, err := h.o.Store.Customer(r.Context(), id)
	if errors.Is(err, auth.ErrNotFound) {
		return nil, notFoundError("customer", id)
	}
	return c, err
}

func (h *Handler) getCustomer(r *http.Request) (int, any, error) {
	c, err := h.customer(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, h.customerView(r, c), nil
}

func (h *Handler) updateCustomer(r *http.Request) (int, any, error) {
	c, err := h.customer(r)
	if err != nil {
		return 0, nil, err
	}
	obj, err := object(r)
	if err != nil {
		return 0, nil, err
	}
	if _, ok := obj["project"]; ok {
		return 0, nil, llm.BadRequest("project", "immutable_field", "project: a customer cannot move to another project.")
	}
	if err := apply(customerFields, obj, c, false); err != nil {
		return 0, nil, err
	}
	if err := checkCustomer(c); err != nil {
		return 0, nil, err
	}
	if err := h.o.Store.UpdateCustomer(r.Context(), c); err != nil {
		switch {
		case errors.Is(err, auth.ErrConflict):
			return 0, nil, duplicateCustomer(c)
		case errors.Is(err, auth.ErrNotFound):
			return 0, nil, notFoundError("customer", c.ID)
		}
		return 0, nil, err
	}
	return http.StatusOK, h.customerView(r, c), nil
}

func (h *Handler) deleteCustomer(r *http.Request) (int, any, error) {
	id := r.PathValue("id")
	switch err := h.o.Store.DeleteCustomer(r.Context(), id); {
	case errors.Is(err, auth.ErrNotFound):
		return 0, nil, notFoundError("customer", id)
	case err != nil:
		return 0, nil, err
	}
	return http.StatusOK, deleted{ID: id, Object: "customer", Deleted: true}, nil
}
