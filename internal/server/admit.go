package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/limit"
	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/route"
	"gatehouse/internal/tokens"
)

// Limits is admission control for one config generation: the process's
// admitter, which every generation shares (counters must outlive a
// reload), and this generation's prices.
type Limits struct {
	Admitter limit.Admitter
	Prices   *tokens.Catalog
	// Customers resolves the customer a request names; nil leaves
	// customer budgets out.
	Customers CustomerLookup
	// HeadersOnRefusal sends the x-ratelimit-* headers on 429s only,
	// instead of on every response.
	HeadersOnRefusal bool
}

// admitterView is what the exchange needs to know of a Limits'
// admitter beyond limit.Admitter, found by type assertion once per
// Limits instead of on every request: the runtime caches an assertion's
// answer only at random (once in about 1,024 look-ups), so an assertion
// made per request costs a look-up of the runtime's itab table on most
// of a process's first few thousand requests.
type admitterView struct {
	limits  *Limits
	into    limit.AdmitterInto   // nil: the admitter has only Admit
	inPlace limit.SettlerInPlace // nil: the admitter has only Settle
	free    bool                 // it is a limit.ContextFreeSettler
}

// admitterOf returns the view of l's admitter, made once for l (and
// again after a runtime with other Limits was served).
func (s *Server) admitterOf(l *Limits) *admitterView {
	v := s.admitters.Load()
	if v == nil || v.limits != l {
		v = &admitterView{limits: l}
		v.into, _ = l.Admitter.(limit.AdmitterInto)
		v.inPlace, _ = l.Admitter.(limit.SettlerInPlace)
		_, v.free = l.Admitter.(limit.ContextFreeSettler)
		s.admitters.Store(v)
	}
	return v
}

// CustomerLookup finds a project's customer by the ID the application
// sends; nil and no error when there is none. *auth.Customers
// implements it, from a cache.
type CustomerLookup interface {
	Lookup(ctx context.Context, projectID, externalID string) (*auth.Customer, error)
}

// Response headers of admission.
const (
	hdrCost           = "X-Gatehouse-Cost-Usd"
	hdrDowngradedFrom = "X-Gatehouse-Downgraded-From"
	hdrCustomer       = "X-Gatehouse-Customer"
	// hdrBudgetLeft is what the tightest budget of the request has left
	// after its reservation (its worst case): limit.Decision.BudgetLeft.
	hdrBudgetLeft = "X-Gatehouse-Budget-Remaining-Usd"

	zeroCost = "0.000000" // limit.Micros(0).String(): what an unanswered request costs
)

// admission is the admission state of one exchange.
type admission struct {
	// The flags side by side (each alone would take eight bytes).
	on       bool // the request went through admission: headers and settlement are due
	budgeted bool // some budget applies: an unknown price cannot be served
	costed   bool // cost holds the answer's cost (computed once: header, settlement, log)
	settled  bool
	priced   bool // price holds the price found for priceAt (see settlePrice)

	tag        string
	maxOut     int // output cap the estimate assumes
	dec        limit.Decision
	customer   *auth.Customer
	downgraded string // the model the client asked for, when served by a cheaper one
	cost       limit.Micros
	costText   string // cost formatted, once

	// price is the price of deployment priceAt's model as the estimate
	// found it, under the catalog's generation priceGen (priced false:
	// none was found). The answer's cost re-uses it when the same
	// deployment answers under the same prices: a look-up a request.
	price    tokens.Price
	priceAt  *provider.Deployment
	priceGen uint64

	// req is the Admission admission builds, kept here rather than
	// allocated on its own for every limited request; its Rates and
	// Budgets use the arrays below, which hold what most keys have (a
	// key's and its project's rates, a key's and its project's budgets):
	// a key limited per model too, or a customer's budgets, grows them
	// (one allocation). Room for the worst case (three rates, four
	// budgets) would take the exchange, held as long as a stream runs,
	// into the next size class (TestExchangeSizeClass).
	req     limit.Admission
	rates   [2]limit.Rate
	budgets [2]limit.Budget
}

// admitRequest is what admission needs from a parsed request (the prompt
// estimate it takes from the exchange, when a limit needs it).
type admitRequest struct {
	maxOut int    // the request's max_tokens (0: the configured default); -1: no output (embeddings)
	user   string // the request's user field, a fallback customer ID
}

// admit checks and reserves the request's limits for group g. It returns
// the group to serve, which differs from g when a customer over budget is
// downgraded; false when the request was refused (and answered).
func (x *exchange) admit(g *route.Group, r admitRequest) (*route.Group, bool) {
	l := x.rt.Limits
	p := x.principal
	if l == nil || p == nil {
		return g, true
	}
	sp := x.span.Child(x.rt.Tracer, "admission", false)
	defer func() {
		if sp.On() {
			sp.Str("gatehouse.refused", string(x.adm.dec.Refused.Kind))
			sp.End()
		}
	}()
	a := &x.adm
	a.on = true
	a.maxOut = l.Prices.MaxOutput(r.maxOut)
	if r.maxOut < 0 {
		a.maxOut = 0
	}
	a.tag = PrincipalTag(p)
	id := x.customerID(r.user)
	x.customer = id
	if id != "" && p.ProjectID != "" && l.Customers != nil {
		c, err := l.Customers.Lookup(x.r.Context(), p.ProjectID, id)
		if err != nil {
			x.fail(llm.AsError(err))
			return nil, false
		}
		a.customer = c
	}
	adm := x.admission(g, true)
	if adm == nil {
		return nil, false
	}
	if !x.reserve(adm) {
		return nil, false
	}
	// The decision is read where reserve put it: a Decision is some 300
	// bytes, and it was copied three times more on its way here.
	d := &a.dec
	if !d.Allowed && d.Refused.Scope == limit.ScopeCustomer && d.Refused.Kind == limit.KindBudget {
		if dg := x.downgradeGroup(); dg != nil {
			if adm = x.admission(dg, false); adm == nil {
				return nil, false
			}
			if !x.reserve(adm) {
				return nil, false
			}
			if d.Allowed {
				a.downgraded = x.model
				x.model, x.group, g = dg.Name, dg, dg
			}
		}
	}
	if !d.Allowed {
		x.fail(refusalError(d))
		return nil, false
	}
	return g, true
}

// reserve calls the admitter and keeps its decision in x.adm.dec, for
// the headers; it answers a failure, leaving x.adm.dec as it was, and
// returns false.
func (x *exchange) reserve(adm *limit.Admission) bool {
	if len(adm.Rates) == 0 && len(adm.Budgets) == 0 {
		x.adm.dec = limit.Decision{Allowed: true} // nothing to count: no call
		return true
	}
	var err error
	if in := x.s.admitterOf(x.rt.Limits).into; in != nil {
		err = in.AdmitInto(x.r.Context(), adm, &x.adm.dec) // written in place, not copied here
	} else {
		var d limit.Decision
		if d, err = x.rt.Limits.Admitter.Admit(x.r.Context(), *adm); err == nil {
			x.adm.dec = d
		}
	}
	if err != nil {
		x.adm.on = false
		if x.r.Context().Err() != nil {
			x.fail(&llm.Error{Kind: llm.KindCanceled, Status: 499, Message: "client went away", Cause: err})
			return false
		}
		x.fail(&llm.Error{Kind: llm.KindUnavailable, Status: http.StatusServiceUnavailable, Type: "server_error",
			Code: "limits_unavailable", RetryAfter: time.Second, Cause: err,
			Message: "The gateway cannot check rate limits and budgets right now; try again shortly."})
		return false
	}
	return true
}

// admission builds the Admission of the request served by g. With
// customer set, the customer's budgets are included; a downgrade leaves
// them out (see README: the downgraded request still counts against the
// key's and the project's rates and budgets).
func (x *exchange) admission(g *route.Group, customer bool) *limit.Admission {
	a := &x.adm
	p := x.principal
	adm := &a.req
	projectID := p.ProjectID
	if projectID == "" {
		projectID = a.tag
	}
	if t := principalTemplate(p, projectID); t != nil {
		x.admissionFrom(t, g, customer)
	} else {
		x.buildAdmission(g, customer, projectID)
	}
	a.budgeted = len(adm.Budgets) > 0
	if !a.budgeted && !anyTokenRate(adm.Rates) {
		return adm // nothing here counts tokens or money: no estimate
	}
	prompt := x.prompt()
	adm.Tokens = int64(prompt + a.maxOut)
	primary := primaryDeployment(g)
	model := g.Name
	if primary != nil {
		model = primary.Model
	}
	gen := x.rt.Limits.Prices.Generation() // read first: a price found after a change is kept under the older one, and found again
	price, err := x.priceOf(primary, model)
	a.price, a.priced, a.priceAt, a.priceGen = price, err == nil, primary, gen
	switch {
	case err == nil:
		adm.Cost = limit.Micros(price.Estimate(prompt, a.maxOut))
	case errors.Is(err, tokens.ErrUnknownPrice) && a.budgeted:
		x.fail(&llm.Error{Kind: llm.KindPermission, Status: http.StatusForbidden, Type: "invalid_request_error",
			Code: "model_price_unknown", Param: "model", Cause: err,
			Message: fmt.Sprintf("The model '%s' (upstream '%s') has no known price, and this request is subject to a budget whose spend could not be counted. Ask the gateway's operator to set a price for it (pricing.overrides).", g.Name, model)})
		return nil
	}
	// An unknown price without a budget is served at cost 0.
	return adm
}

// buildAdmission makes x.adm.req, the Admission of the request served
// by g, from the principal's fields: for a principal whose Memo keeps
// no template of them (see admissionFrom).
func (x *exchange) buildAdmission(g *route.Group, customer bool, projectID string) {
	a := &x.adm
	p := x.principal
	adm := &a.req
	*adm = limit.Admission{Tag: a.tag, Rates: a.rates[:0], Budgets: a.budgets[:0], Memo: p.LimitMemo}
	adm.Rates = appendKeyRate(adm.Rates, p)
	adm.Rates = appendModelRate(adm.Rates, p, g)
	adm.Rates = appendProjectRate(adm.Rates, p, projectID)
	adm.Budgets = appendFixedBudgets(adm.Budgets, p, projectID)
	if customer {
		adm.Budgets = appendCustomerBudgets(adm.Budgets, a.customer)
	}
}

// admissionFrom makes x.adm.req, the Admission of the request served by
// g, from t, the principal's template: its rates and budgets as they
// are for a request with no rate for its model and no customer budgets
// (no copy, and the admitter knows them by their address), copied with
// those otherwise, in buildAdmission's order.
func (x *exchange) admissionFrom(t *limit.Template, g *route.Group, customer bool) {
	a := &x.adm
	p := x.principal
	adm := &a.req
	// Field by field: a composite literal is built aside, then copied.
	adm.Tag, adm.Rates, adm.Budgets, adm.Memo = a.tag, t.Rates(), t.Budgets(), p.LimitMemo
	adm.Tokens, adm.Cost = 0, 0
	if len(p.ModelLimits) != 0 {
		x.insertModelRate(t, g)
	}
	if c := a.customer; customer && c != nil && (c.DailyUSD != nil || c.MonthlyUSD != nil) {
		adm.Budgets = appendCustomerBudgets(append(a.budgets[:0], t.Budgets()...), c)
	}
}

// insertModelRate puts the key's rate for the model of group g, if it
// has one, into x.adm.req's rates, copied from template t, between the
// key's own and its project's (buildAdmission's order).
func (x *exchange) insertModelRate(t *limit.Template, g *route.Group) {
	modelRate, ok := keyModelRate(x.principal, g)
	if !ok {
		return
	}
	a := &x.adm
	keyRates := t.Source().(*templateSource).keyRates
	rs := append(a.rates[:0], t.Rates()[:keyRates]...)
	rs = append(rs, modelRate)
	a.req.Rates = append(rs, t.Rates()[keyRates:]...)
}

// principalTemplate is the template of p's admissions (their key's and
// project's rates and budgets, limit.Template) with projectID as the
// project's counters' ID: the one p's Memo keeps, made and kept there by
// the first admission of the key. nil when p has no Memo, or when the
// one kept was made from other values (a principal copied and changed
// since, or counted under another tag): the caller builds the admission
// from p's fields then, as a template would not be used again.
func principalTemplate(p *auth.Principal, projectID string) *limit.Template {
	m := p.LimitMemo
	if m == nil {
		return nil
	}
	if t := m.Template(); t != nil {
		if src, ok := t.Source().(*templateSource); ok && (src.madeFor(p, projectID) || src.describes(p, projectID)) {
			return t
		}
		return nil
	}
	t := newPrincipalTemplate(p, projectID)
	m.KeepTemplate(t)
	if m.Template() != t {
		return nil // another admission kept one first: it is checked next time
	}
	return t
}

// newPrincipalTemplate makes the template of p's admissions, with the
// values it was made from as its source.
func newPrincipalTemplate(p *auth.Principal, projectID string) *limit.Template {
	var rates [2]limit.Rate
	var budgets [2]limit.Budget
	rs := appendKeyRate(rates[:0], p)
	keyRates := len(rs)
	rs = appendProjectRate(rs, p, projectID)
	bs := appendFixedBudgets(budgets[:0], p, projectID)
	return limit.NewTemplate(rs, bs, newTemplateSource(p, projectID, keyRates))
}

// templateSource is what a principal's template was made from: the
// fields of the principal that its rates and budgets are made of. A
// template applies to a principal whose fields are these values (which
// a principal, never changed once made, keeps).
type templateSource struct {
	// principal is the one the template was made for: a principal
	// handed out is never changed (auth.Principal), so the same one
	// with the same project ID needs no look at its values (madeFor);
	// a copy, which shares its LimitMemo, is checked value by value.
	principal                       *auth.Principal
	keyID, name, project, projectID string
	rpm, tpm                        int
	projectLimits                   auth.Limits
	budget, projectBudget           budgetSource
	// keyRates is how many of the template's rates are the key's own
	// (0 or 1), before its project's: a rate per model goes between.
	keyRates int
}

// budgetSource is a budget a template was made from; set false: none.
type budgetSource struct {
	set    bool
	budget auth.Budget
}

func budgetSourceOf(b *auth.Budget) budgetSource {
	if b == nil {
		return budgetSource{}
	}
	return budgetSource{true, *b}
}

// is reports whether b is the budget s was made from.
func (s *budgetSource) is(b *auth.Budget) bool {
	if b == nil {
		return !s.set
	}
	return s.set && b.USD == s.budget.USD && llm.SameString(b.Period, s.budget.Period)
}

func newTemplateSource(p *auth.Principal, projectID string, keyRates int) *templateSource {
	return &templateSource{principal: p, keyID: p.KeyID, name: p.Name, project: p.Project, projectID: projectID,
		rpm: p.RPM, tpm: p.TPM, projectLimits: p.ProjectLimits,
		budget: budgetSourceOf(p.Budget), projectBudget: budgetSourceOf(p.ProjectBudget), keyRates: keyRates}
}

// madeFor reports whether s was made for p itself, with projectID as its
// project's counters' ID.
func (s *templateSource) madeFor(p *auth.Principal, projectID string) bool {
	return s.principal == p && llm.SameString(s.projectID, projectID)
}

// describes reports whether s was made from p's values, with projectID
// as its project's counters' ID. The strings are compared by
// llm.SameString: those of the principal a template was made from are
// the very strings it keeps, whose bytes are not read.
func (s *templateSource) describes(p *auth.Principal, projectID string) bool {
	// Lengths and numbers first, then the names' contents by address
	// (llm.SameData): each test a branch, not a value for the next.
	if s.rpm != p.RPM || s.tpm != p.TPM || s.projectLimits != p.ProjectLimits ||
		len(s.keyID) != len(p.KeyID) || len(s.name) != len(p.Name) || len(s.project) != len(p.Project) || len(s.projectID) != len(projectID) {
		return false
	}
	return llm.SameData(s.keyID, p.KeyID) && llm.SameData(s.name, p.Name) &&
		llm.SameData(s.project, p.Project) && llm.SameData(s.projectID, projectID) &&
		s.budget.is(p.Budget) && s.projectBudget.is(p.ProjectBudget)
}

// appendKeyRate appends the key's own rate, if it has one.
func appendKeyRate(rs []limit.Rate, p *auth.Principal) []limit.Rate {
	if p.RPM <= 0 && p.TPM <= 0 {
		return rs
	}
	return append(rs, limit.Rate{Scope: limit.ScopeKey, ID: p.KeyID, Name: keyName(p), RPM: int64(p.RPM), TPM: int64(p.TPM)})
}

// keyModelRate is the key's rate for the model of group g; false when
// it has none.
func keyModelRate(p *auth.Principal, g *route.Group) (limit.Rate, bool) {
	if len(p.ModelLimits) == 0 {
		return limit.Rate{}, false // most keys: no map look-up
	}
	ml, ok := p.ModelLimits[g.Name]
	if !ok || (ml.RPM <= 0 && ml.TPM <= 0) {
		return limit.Rate{}, false
	}
	return limit.Rate{Scope: limit.ScopeKeyModel, ID: limit.KeyModelID(p.KeyID, g.Name),
		Name: keyName(p) + "/" + g.Name, RPM: int64(ml.RPM), TPM: int64(ml.TPM)}, true
}

// appendModelRate appends the key's rate for the model of group g, if
// it has one.
func appendModelRate(rs []limit.Rate, p *auth.Principal, g *route.Group) []limit.Rate {
	if r, ok := keyModelRate(p, g); ok {
		return append(rs, r)
	}
	return rs
}

// appendProjectRate appends the rate of the key's project, if it has
// one, counted under projectID.
func appendProjectRate(rs []limit.Rate, p *auth.Principal, projectID string) []limit.Rate {
	pl := p.ProjectLimits
	if pl.RPM <= 0 && pl.TPM <= 0 {
		return rs
	}
	return append(rs, limit.Rate{Scope: limit.ScopeProject, ID: projectID, Name: p.Project, RPM: int64(pl.RPM), TPM: int64(pl.TPM)})
}

// appendFixedBudgets appends the key's budget and its project's (counted
// under projectID), those it has.
func appendFixedBudgets(bs []limit.Budget, p *auth.Principal, projectID string) []limit.Budget {
	bs = appendBudget(bs, limit.ScopeKey, p.KeyID, keyName(p), p.Budget)
	return appendBudget(bs, limit.ScopeProject, projectID, p.Project, p.ProjectBudget)
}

// appendCustomerBudgets appends customer c's daily and monthly budgets,
// those it has (none for a nil c).
func appendCustomerBudgets(bs []limit.Budget, c *auth.Customer) []limit.Budget {
	if c == nil {
		return bs
	}
	name := c.Name
	if name == "" {
		name = c.ExternalID
	}
	if c.DailyUSD != nil {
		bs = append(bs, limit.Budget{Scope: limit.ScopeCustomer, ID: c.ID, Name: name, Limit: limit.USD(*c.DailyUSD), Period: limit.Day})
	}
	if c.MonthlyUSD != nil {
		bs = append(bs, limit.Budget{Scope: limit.ScopeCustomer, ID: c.ID, Name: name, Limit: limit.USD(*c.MonthlyUSD), Period: limit.Month})
	}
	return bs
}

// anyTokenRate reports whether one of rs has a tokens-per-minute limit.
func anyTokenRate(rs []limit.Rate) bool {
	for _, r := range rs {
		if r.TPM > 0 {
			return true
		}
	}
	return false
}

func appendBudget(bs []limit.Budget, scope limit.Scope, id, name string, b *auth.Budget) []limit.Budget {
	if b == nil {
		return bs
	}
	p, err := limit.ParsePeriod(b.Period)
	if err != nil {
		p = limit.Total // records are validated on write; never lose a budget over a typo
	}
	return append(bs, limit.Budget{Scope: scope, ID: id, Name: name, Limit: limit.USD(b.USD), Period: p})
}

// downgradeGroup is the group a customer over budget is served by
// instead, when its record says so and the key may use it; nil otherwise.
func (x *exchange) downgradeGroup() *route.Group {
	c := x.adm.customer
	if c == nil || c.OnExceed != auth.OnExceedDowngrade || c.DowngradeModel == "" || c.DowngradeModel == x.model {
		return nil
	}
	g, ok := x.rt.Routes.Lookup(c.DowngradeModel)
	if !ok || !x.principal.Allows(c.DowngradeModel) {
		return nil
	}
	if r := (route.Runner{Table: x.rt.Routes, Allow: x.allowProvider()}); !r.Reachable(g) {
		return nil
	}
	return g
}

// primaryDeployment is the deployment most likely to serve a group: its
// first target in routing order (nil for a group with none). The
// reservation is priced there; a failover to a dearer deployment settles
// above it (see README for the bound this puts on a budget).
func primaryDeployment(g *route.Group) *provider.Deployment {
	if g.Mode != route.ModeAny {
		if ms := g.Members(); len(ms) > 0 {
			return ms[0].Deployment
		}
	}
	if len(g.Targets) > 0 {
		return g.Targets[0]
	}
	return nil
}

// priceOf is the price of model served by d: a deployment on a local
// server (provider.Deployment.LocalPricing) costs nothing unless the
// config or the admin API sets a price for the model; others take the
// catalog's. d may be nil (a group with no targets).
func (x *exchange) priceOf(d *provider.Deployment, model string) (tokens.Price, error) {
	prices := x.rt.Limits.Prices
	if d != nil && d.LocalPricing {
		p, _ := prices.Configured(model)
		return p, nil
	}
	return prices.Price(model)
}

// settlePrice is the price of the model deployment d serves, for the
// answer's cost: the price admission found, when it priced the request
// at d and the catalog's prices have not changed since; looked up
// afresh otherwise (a failover to another deployment, or a price the
// admin API set while the request ran: the price in force when the
// request ends is the one it pays, as when each was looked up then).
// false: d's model has no price.
func (x *exchange) settlePrice(d *provider.Deployment) (tokens.Price, bool) {
	a := &x.adm
	if a.priceAt == d && d != nil && a.priceGen == x.rt.Limits.Prices.Generation() {
		return a.price, a.priced
	}
	p, err := x.priceOf(d, d.Model)
	return p, err == nil
}

// PrincipalTag is the Redis hash tag of a principal's counters: its
// project ID, or for a static key (whose project exists only in the
// config) a name stable per project. Whoever reads the counters (the
// admin API's spend) finds them under it.
func PrincipalTag(p *auth.Principal) string {
	switch {
	case p.ProjectID != "":
		return p.ProjectID
	case p.Project != "":
		// Made with the principal; one built without it, or changed
		// since, gets it afresh, so a stale tag costs time, never the
		// wrong counters.
		if t := p.StaticTag; len(t) == len(auth.StaticTagPrefix)+len(p.Project) &&
			t[len(auth.StaticTagPrefix):] == p.Project && t[:len(auth.StaticTagPrefix)] == auth.StaticTagPrefix {
			return t
		}
		return auth.StaticTagPrefix + p.Project
	}
	return p.KeyID
}

func keyName(p *auth.Principal) string {
	if p.Name != "" {
		return p.Name
	}
	return p.KeyID
}

// customerID is the customer a request names: the x-gatehouse-customer
// header, else the request's user field (Anthropic: metadata.user_id).
func (x *exchange) customerID(user string) string {
	if v := x.ownField(hdrCustomer); v != "" {
		return v
	}
	return user
}

// refusalError is the 429 of a refused admission.
func refusalError(d *limit.Decision) *llm.Error {
	r := d.Refused
	e := &llm.Error{Kind: llm.KindRateLimit, Status: http.StatusTooManyRequests, Code: r.Code(), Message: r.Message(), RetryAfter: d.RetryAfter}
	switch r.Kind {
	case limit.KindBudget:
		e.Kind, e.Type = llm.KindBudget, "insufficient_quota"
	case limit.KindTokens:
		e.Type = "tokens"
	default:
		e.Type = "requests"
	}
	return e
}

// limitHeaders sets the x-ratelimit-* headers of the binding buckets
// and, on a downgrade, which model was asked for.
func (x *exchange) limitHeaders(h http.Header) {
	a := &x.adm
	if !a.on {
		return
	}
	if a.dec.Budgeted {
		h[hdrBudgetLeft] = x.vals.one(valBudget, a.dec.BudgetLeft.String())
	}
	if a.dec.Allowed && x.rt.Limits.HeadersOnRefusal {
		return
	}
	quotaHeaders(h, &x.vals, x.principal, a.dec.Requests, a.dec.Tokens)
	if a.downgraded != "" {
		h.Set(hdrDowngradedFrom, a.downgraded)
	}
}

// appendLimitFields is limitHeaders as lines; the downgrade's model name
// is the client's, so it goes into the map, which the server checks.
func (x *exchange) appendLimitFields(b []byte) []byte {
	a := &x.adm
	if !a.on {
		return b
	}
	if a.dec.Budgeted {
		b = append(b, hdrBudgetLeft+": "...)
		b = append(a.dec.BudgetLeft.Append(b), '\r', '\n')
	}
	if a.dec.Allowed && x.rt.Limits.HeadersOnRefusal {
		return b
	}
	if q := a.dec.Requests; q.Limit > 0 {
		b = appendQuotaFields(b, x.principal, q, false, auth.HeaderLimitRequests+": ",
			"\r\n"+auth.HeaderRemainingRequests+": ", "\r\nX-Ratelimit-Reset-Requests: ")
	}
	if q := a.dec.Tokens; q.Limit > 0 {
		b = appendQuotaFields(b, x.principal, q, true, auth.HeaderLimitTokens+": ",
			"\r\n"+auth.HeaderRemainingTokens+": ", "\r\nX-Ratelimit-Reset-Tokens: ")
	}
	if a.downgraded != "" {
		x.w.Header().Set(hdrDowngradedFrom, a.downgraded)
	}
	return b
}

// appendQuotaFields appends the limit, remaining and reset lines of one
// bucket (of tokens or of requests); the names come with the separators
// around them (": ", and the line end before), so each is one copy of a
// constant. When the limit is one of the key's rates, the principal
// keeps the lines up to the remaining count as one text (RateLines).
func appendQuotaFields(b []byte, p *auth.Principal, q limit.Quota, tokens bool, limitName, remainingName, resetName string) []byte {
	if lines := rateLines(p, q.Limit, tokens); lines != "" {
		b = append(b, lines...)
	} else {
		b = append(appendRate(append(b, limitName...), p, q.Limit), remainingName...)
	}
	b = limit.AppendInt(b, max(q.Remaining, 0))
	return append(appendReset(append(b, resetName...), q.Reset), '\r', '\n')
}

// quotaHeaders sets the limit, remaining and reset headers of the request
// and token buckets (of those with a limit). Every admitted response
// carries them, so their up to six values share one string, kept in
// vals.
func quotaHeaders(h http.Header, vals *headerValues, p *auth.Principal, req, tok limit.Quota) {
	var buf [128]byte
	var ends [6]int
	b := buf[:0]
	for i, q := range [2]limit.Quota{req, tok} {
		if q.Limit <= 0 {
			continue
		}
		b = appendRate(b, p, q.Limit)
		ends[3*i] = len(b)
		b = limit.AppendInt(b, max(q.Remaining, 0))
		ends[3*i+1] = len(b)
		b = appendReset(b, q.Reset)
		ends[3*i+2] = len(b)
	}
	if len(b) == 0 {
		return
	}
	all := string(b)
	start := 0
	for i, end := range ends {
		if end == 0 {
			continue
		}
		h[quotaHeaderKeys[i]] = vals.one(valQuota+i, all[start:end])
		start = end
	}
}

// appendRate appends a bucket's limit in decimal: the text the principal
// keeps of its own and its project's rates when it is one of them (the
// limit headers repeat them on every answer of the key), formatted
// otherwise (a per-model rate).
func appendRate(b []byte, p *auth.Principal, n int64) []byte {
	if p != nil {
		if t := p.RateText(n); t != "" {
			return append(b, t...)
		}
	}
	return limit.AppendInt(b, n)
}

// rateLines is p.RateLines, "" for no principal.
func rateLines(p *auth.Principal, n int64, tokens bool) string {
	if p == nil {
		return ""
	}
	return p.RateLines(n, tokens)
}

// The x-ratelimit header names in canonical form, built once: they are
// set on every admitted response.
var quotaHeaderKeys = [6]string{
	auth.HeaderLimitRequests, auth.HeaderRemainingRequests, "X-Ratelimit-Reset-Requests",
	auth.HeaderLimitTokens, auth.HeaderRemainingTokens, "X-Ratelimit-Reset-Tokens",
}

// resetString formats a reset time as OpenAI does: Go's duration syntax,
// in whole milliseconds below a second ("20ms") and whole seconds above
// ("1s", "6m0s"), rounded up so a client that waits that long finds the
// bucket refilled.
func resetString(d time.Duration) string { return string(appendReset(nil, d)) }

// appendReset appends resetString(d) without allocating: the same text
// time.Duration.String gives for the rounded value.
func appendReset(b []byte, d time.Duration) []byte {
	switch {
	case d <= 0:
		return append(b, "0s"...)
	case d < time.Second:
		ms := int64((d + time.Millisecond - 1) / time.Millisecond)
		if ms >= 1000 {
			return append(b, "1s"...)
		}
		return append(limit.AppendInt(b, ms), "ms"...)
	}
	secs := int64((d + time.Second - 1) / time.Second)
	h, m, sec := secs/3600, secs/60%60, secs%60
	if h > 0 {
		b = append(limit.AppendInt(b, h), 'h')
	}
	if h > 0 || m > 0 {
		b = append(limit.AppendInt(b, m), 'm')
	}
	return append(limit.AppendInt(b, sec), 's')
}

// hdrTrailer is net/http's own name for the header that declares trailers,
// stored directly like the other constant names.
const hdrTrailer = "Trailer"

// declareCostTrailer announces the cost as a trailer of a stream: the
// usage is known only at its end, after the headers are gone.
func (x *exchange) declareCostTrailer() {
	if x.adm.on {
		x.w.Header()[hdrTrailer] = costTrailer
	}
}

// costTrailer is the Trailer field's value, shared by every stream: it
// is never written (net/http's servers and the engine read it; a
// handler's Header.Add appends to a full slice, which copies it).
var costTrailer = []string{hdrCost}

// answeredCost is the cost of what the billed attempt used: its usage at
// the price of the model that served it. With no usage reported (or no
// price known) for a request that was answered, the reservation stands,
// on the side of counting too much; an unanswered request costs nothing.
func (x *exchange) answeredCost() limit.Micros {
	if !x.written || x.deployment == nil {
		return 0
	}
	reserved := x.adm.dec.Reservation.Admission.Cost
	if !x.hasUsage {
		if x.status >= 300 {
			return 0
		}
		if x.adm.budgeted {
			return reserved
		}
		// Nothing was reserved: the estimate a reservation would have
		// held, at the price of the deployment that answered.
		if p, ok := x.settlePrice(x.deployment); ok {
			return limit.Micros(p.Estimate(x.prompt(), x.adm.maxOut))
		}
		return 0
	}
	return x.usageCost(x.deployment, x.usage)
}

// usageCost prices usage at deployment d: with no price known, a
// budgeted request keeps its reservation and any other costs nothing; a
// count of the gateway's own (usageEstimated) never bills beyond what
// was reserved.
func (x *exchange) usageCost(d *provider.Deployment, u llm.Usage) limit.Micros {
	reserved := x.adm.dec.Reservation.Admission.Cost
	p, ok := x.settlePrice(d)
	c := p.Cost(u)
	if !ok {
		if x.adm.budgeted {
			return reserved
		}
		return 0
	}
	if x.usageEstimated && x.adm.budgeted && limit.Micros(c) > reserved {
		return reserved
	}
	return limit.Micros(c)
}

// streamUsageCost is the relay's UsageCost for a stream served by d: the
// same figure the trailer and the settlement get; nil without admission.
func (x *exchange) streamUsageCost(d *provider.Deployment) func(llm.Usage) string {
	if !x.adm.on {
		return nil
	}
	return func(u llm.Usage) string { return x.usageCost(d, u).String() }
}

// costHeader fixes the answer's cost (answeredCost) the first time it is
// asked for and returns it formatted: the header, the settlement and the
// log line share one computation.
func (x *exchange) costHeader() string {
	a := &x.adm
	if !a.costed {
		a.cost, a.costed = x.answeredCost(), true
		a.costText = a.cost.String()
	}
	return a.costText
}

// settle replaces the reservation with what the request really used,
// once, however the request ended (success, upstream failure, client
// gone, panic), and puts the cost in the stream's trailer. The admitter
// makes it cheap: in memory, or a queued Redis call.
func (x *exchange) settle() {
	a := &x.adm
	if !a.on || a.settled {
		return
	}
	a.settled = true
	cost := x.costHeader()
	if x.stream && x.written {
		x.w.Header()[hdrCost] = x.vals.one(valCost, cost) // the trailer (a stream's answer set no cost field before)
	}
	res := &a.dec.Reservation // read where admission put it, not copied
	if !res.Valid() {
		return
	}
	actual := limit.Actual{Cost: a.cost}
	if x.hasUsage && x.cache.hit == nil { // a hit spends a request of the rate limit, no tokens, no budget
		actual.Tokens = int64(x.usage.PromptTokens + x.usage.CompletionTokens)
	}
	// The request's context may be gone (client hang-up); the settle must
	// still happen (no admitter blocks on it). An admitter that settles
	// in memory reads no context (limit.ContextFreeSettler) and gets the
	// request's as it is; any other gets context.WithoutCancel of it. (A
	// context type of our own that forwarded Value would also forward the
	// context package's private key for the request's cancellation state.)
	ctx, view := x.r.Context(), x.s.admitterOf(x.rt.Limits)
	if !view.free {
		ctx = context.WithoutCancel(ctx)
	}
	var err error
	if view.inPlace != nil {
		err = view.inPlace.SettleInPlace(ctx, res, actual) // read where it is, not copied
	} else {
		err = x.rt.Limits.Admitter.Settle(ctx, *res, actual)
	}
	if err != nil {
		x.s.log.Error("settle failed", "request_id", x.id, "err", err.Error())
	}
}
