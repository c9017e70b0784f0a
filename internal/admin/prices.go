package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/llm"
	"gatehouse/internal/tokens"
)

// Price overrides. The store's prices win over the config's
// (pricing.overrides), which win over the embedded catalog; the API
// lists both kinds of override and changes only the store's.

// Where an override comes from.
const (
	sourceStore  = "store"
	sourceConfig = "config"
)

// priceView is one override as the API shows it.
type priceView struct {
	Object      string     `json:"object"` // always "price"
	Model       string     `json:"model"`
	Input       float64    `json:"input"`
	CachedInput float64    `json:"cached_input"`
	Output      float64    `json:"output"`
	Source      string     `json:"source"` // store | config
	UpdatedAt   *time.Time `json:"updated_at,omitempty"`
}

func storedView(p tokens.StoredPrice) priceView {
	at := p.UpdatedAt
	return priceView{Object: "price", Model: p.Model, Input: p.Input, CachedInput: cachedOrInput(p.CachedInput, p.Input),
		Output: p.Output, Source: sourceStore, UpdatedAt: &at}
}

// cachedOrInput shows the cached-input price that applies: 0 means the
// input price.
func cachedOrInput(cached, input float64) float64 {
	if cached == 0 {
		return input
	}
	return cached
}

func (h *Handler) priceStore() (tokens.PriceStore, error) {
	if h.o.Prices == nil {
		return nil, &llm.Error{Kind: llm.KindNotImplemented, Status: http.StatusNotImplemented, Type: "invalid_request_error",
			Code: "not_implemented", Message: "This gateway's record store does not keep prices."}
	}
	return h.o.Prices, nil
}

// listPrices lists every override in effect: the store's, then the
// config's that no store price shadows, by model, a page at a time
// (limit and after, like every list).
func (h *Handler) listPrices(r *http.Request) (int, any, error) {
	pg, err := page(r)
	if err != nil {
		return 0, nil, err
	}
	ps, err := h.priceStore()
	if err != nil {
		return 0, nil, err
	}
	stored, err := ps.Prices(r.Context())
	if err != nil {
		return 0, nil, err
	}
	views := make([]priceView, 0, len(stored)+len(h.o.ConfigPrices))
	seen := make(map[string]bool, len(stored))
	for _, p := range stored {
		views = append(views, storedView(p))
		seen[p.Model] = true
	}
	for model, p := range h.o.ConfigPrices {
		if !seen[model] {
			views = append(views, priceView{Object: "price", Model: model, Input: p.Input,
				CachedInput: cachedOrInput(p.CachedInput, p.Input), Output: p.Output, Source: sourceConfig})
		}
	}
	slices.SortFunc(views, func(a, b priceView) int { return strings.Compare(a.Model, b.Model) })
	// Pages are cut by model id, the list's order: after names the last
	// model of the previous page.
	start, _ := slices.BinarySearchFunc(views, pg.After, func(v priceView, after string) int {
		if v.Model <= after {
			return -1
		}
		return 1
	})
	if pg.After == "" {
		start = 0
	}
	views = views[start:]
	if len(views) > pg.Limit+1 {
		views = views[:pg.Limit+1]
	}
	return http.StatusOK, newList(views, pg.Limit, func(v *priceView) string { return v.Model }), nil
}

// priceModel is the model the path names.
func priceModel(r *http.Request) (string, error) {
	m := r.PathValue("model")
	if strings.TrimSpace(m) != m || m == "" || len(m) > 256 {
		return "", llm.BadRequest("model", "invalid_model", "model: must be an upstream model id of 1 to 256 characters without surrounding spaces, not %s.", quote(m))
	}
	return m, nil
}

// setPrice is PUT: create or replace the store's price of a model.
func (h *Handler) setPrice(r *http.Request) (int, any, error) {
	ps, err := h.priceStore()
	if err != nil {
		return 0, nil, err
	}
	model, err := priceModel(r)
	if err != nil {
		return 0, nil, err
	}
	obj, err := object(r)
	if err != nil {
		return 0, nil, err
	}
	p := tokens.StoredPrice{Model: model}
	fields := []field[tokens.StoredPrice]{
		{name: "input", set: func(p *tokens.StoredPrice, v json.RawMessage) error { return setPerMillion(&p.Input, v) }},
		{name: "cached_input", set: func(p *tokens.StoredPrice, v json.RawMessage) error { return setPerMillion(&p.CachedInput, v) }},
		{name: "output", set: func(p *tokens.StoredPrice, v json.RawMessage) error { return setPerMillion(&p.Output, v) }},
	}
	for _, req := range []string{"input", "output"} {
		if _, ok := obj[req]; !ok {
			return 0, nil, llm.BadRequest(req, "missing_field", "%s: required (USD per million tokens).", req)
		}
	}
	if err := apply(fields, obj, &p, true); err != nil {
		return 0, nil, err
	}
	if err := ps.SetPrice(r.Context(), &p); err != nil {
		return 0, nil, err
	}
	h.pricesChanged(r)
	return http.StatusOK, storedView(p), nil
}

// deletePrice removes the store's price; the config's or the catalog's
// applies again.
func (h *Handler) deletePrice(r *http.Request) (int, any, error) {
	ps, err := h.priceStore()
	if err != nil {
		return 0, nil, err
	}
	model, err := priceModel(r)
	if err != nil {
		return 0, nil, err
	}
	if err := ps.DeletePrice(r.Context(), model); err != nil {
		if errors.Is(err, auth.ErrNotFound) {
			return 0, nil, notFoundError("price", model)
		}
		return 0, nil, err
	}
	h.pricesChanged(r)
	return http.StatusOK, deleted{ID: model, Object: "price", Deleted: true}, nil
}

// pricesChanged refreshes the serving catalog before the write is
// answered, so this process prices the next request with it. A failure
// is logged: the write stands and the next refresh picks it up.
func (h *Handler) pricesChanged(r *http.Request) {
	if h.o.PricesChanged == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if err := h.o.PricesChanged(ctx); err != nil {
		h.o.Log.Error("admin: refreshing prices after a change", "error", err.Error())
	}
}

// setPerMillion sets a price in USD per million tokens.
func setPerMillion(dst *float64, v json.RawMessage) error {
	f, err := parseUSD(v)
	if err != nil {
		return err
	}
	if f > 1e6 {
		return fmt.Errorf("must be at most 1000000 (USD per million tokens), got %s", v)
	}
	*dst = f
	return nil
}
