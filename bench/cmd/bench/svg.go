package main

import (
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/goredisson/locks/bench"
)

var colors = map[string]string{
	"rlock":       "#d62728",
	"limit":       "#7f7f7f",
	"bsm":         "#1f77b4",
	"redsync":     "#2ca02c",
	"rueidislock": "#9467bd",
	"redisson":    "#ff7f0e",
}

func color(c string) string {
	if v, ok := colors[c]; ok {
		return v
	}
	return "#e6b35c" // Redisson, tuned
}

func shortName(c string) string {
	switch c {
	case "limit":
		return "limit (bare scripts)"
	case "bsm":
		return "bsm/redislock"
	case "redisson":
		return "Redisson"
	}
	if strings.HasPrefix(c, "redisson-subs") {
		return "Redisson (subs/conn " + strings.TrimPrefix(c, "redisson-subs") + ")"
	}
	return c
}

type bar struct {
	contender string
	v         float64
	ok        bool
	failText  string // shown instead of a bar when !ok (default "failed")
}

type group struct {
	label string
	bars  []bar
}

// panel draws one grouped bar chart at (x, y) of size w×h.
func panel(b *strings.Builder, x, y, w, h float64, title, unit string, log bool, groups []group, format func(float64) string) {
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="15" font-weight="bold">%s</text>`+"\n", x, y+16, html.EscapeString(title))
	top, bottom := y+34, y+h-28
	left, right := x+62, x+w-10
	maxV, minV := 0.0, math.Inf(1)
	for _, g := range groups {
		for _, br := range g.bars {
			if br.ok && br.v > 0 {
				maxV = math.Max(maxV, br.v)
				minV = math.Min(minV, br.v)
			}
		}
	}
	if maxV == 0 {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="12">no data</text>`+"\n", left, (top+bottom)/2)
		return
	}
	var ticks []float64
	var scale func(float64) float64
	if log {
		lo := math.Pow(10, math.Floor(math.Log10(minV)))
		hi := math.Pow(10, math.Ceil(math.Log10(maxV)))
		if hi <= lo {
			hi = lo * 10
		}
		for t := lo; t <= hi*1.001; t *= 10 {
			ticks = append(ticks, t)
		}
		scale = func(v float64) float64 {
			if v <= lo {
				return bottom
			}
			return bottom - (math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*(bottom-top)
		}
	} else {
		step := niceStep(maxV / 5)
		hi := math.Ceil(maxV/step) * step
		for t := 0.0; t <= hi*1.0001; t += step {
			ticks = append(ticks, t)
		}
		scale = func(v float64) float64 { return bottom - v/hi*(bottom-top) }
	}
	for _, t := range ticks {
		ty := scale(t)
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/>`+"\n", left, ty, right, ty)
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" font-size="11" text-anchor="end" fill="#555">%s</text>`+"\n", left-4, ty+4, format(t))
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="11" fill="#555" transform="rotate(-90 %.0f %.0f)" text-anchor="middle">%s</text>`+"\n",
		x+12, (top+bottom)/2, x+12, (top+bottom)/2, html.EscapeString(unit))
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#333"/>`+"\n", left, bottom, right, bottom)
	gw := (right - left) / float64(len(groups))
	for i, g := range groups {
		gx := left + float64(i)*gw
		n := float64(len(g.bars))
		bw := math.Min(34, (gw-16)/math.Max(n, 1))
		start := gx + (gw-bw*n)/2
		for j, br := range g.bars {
			bx := start + float64(j)*bw
			if !br.ok {
				t := br.failText
				if t == "" {
					t = "failed"
				}
				fmt.Fprintf(b, `<text x="%.1f" y="%.0f" font-size="10" text-anchor="start" fill="%s" transform="rotate(-90 %.1f %.0f)">%s</text>`+"\n",
					bx+bw/2+3, bottom-4, color(br.contender), bx+bw/2+3, bottom-4, html.EscapeString(t))
				continue
			}
			by := scale(br.v)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s</title></rect>`+"\n",
				bx+1, by, bw-2, bottom-by, color(br.contender), html.EscapeString(shortName(br.contender)), format(br.v))
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="9" text-anchor="middle" fill="#333">%s</text>`+"\n", bx+bw/2, by-3, format(br.v))
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" font-size="12" text-anchor="middle">%s</text>`+"\n", gx+gw/2, bottom+17, html.EscapeString(g.label))
	}
}

func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func short(v float64) string {
	switch {
	case v >= 999.5e3:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 999.5:
		return fmt.Sprintf("%.3gk", v/1e3)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.3g", v)
	case v == 0:
		return "0"
	}
	return fmt.Sprintf("%.2g", v)
}

func shortUs(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gs", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gms", v/1e3)
	}
	return fmt.Sprintf("%.3gµs", v)
}

func (r *runner) svg() string {
	o := r.o
	const W = 980.0
	var b strings.Builder
	var panels []func(y float64)
	const ph = 300.0
	if o.scenarios["s1"] {
		panels = append(panels, func(y float64) {
			var gs []group
			for _, conc := range o.s1Conc {
				g := group{label: fmt.Sprintf("%d goroutine%s", conc, map[bool]string{true: "", false: "s"}[conc == 1])}
				for _, c := range r.contendersFor("s1") {
					s := r.med(key("s1", conc, c), rate)
					if s.present {
						g.bars = append(g.bars, bar{contender: c, v: s.v, ok: s.good()})
					}
				}
				gs = append(gs, g)
			}
			panel(&b, 10, y, W-20, ph, "S1 uncontended: lock+unlock pairs per second (higher is better)", "pairs/s", false, gs, short)
		})
	}
	if o.scenarios["s2"] {
		panels = append(panels, func(y float64) {
			g1 := group{label: "handoffs per second (higher is better)"}
			g2 := group{label: "handoff latency p50 (lower is better)"}
			for _, c := range r.contendersFor("s2") {
				k := key("s2", 16, c)
				if s := r.med(k, rate); s.present {
					g1.bars = append(g1.bars, bar{contender: c, v: s.v, ok: s.good()})
				}
				if s := r.med(k, ext("from_call_p50_us")); s.present {
					g2.bars = append(g2.bars, bar{contender: c, v: s.v, ok: s.good()})
				}
			}
			panel(&b, 10, y, W/2-15, ph, "S2 contended (16 goroutines, 2 clients)", "handoffs/s (log)", true, []group{g1}, short)
			panel(&b, W/2+5, y, W/2-15, ph, "S2 handoff latency p50, from Unlock call", "µs (log)", true, []group{g2}, shortUs)
		})
	}
	if o.scenarios["s3"] {
		panels = append(panels, func(y float64) {
			var gs []group
			for _, n := range o.s3Sizes {
				g := group{label: commas(int64(n)) + " locks held"}
				for _, c := range r.contendersFor("s3") {
					s := r.med(key("s3", n, c), func(x bench.Result) float64 { return x.ScriptPerSec })
					if s.present {
						g.bars = append(g.bars, bar{contender: c, v: s.v, ok: s.good()})
					}
				}
				gs = append(gs, g)
			}
			panel(&b, 10, y, W/2-15, ph, fmt.Sprintf("S3 watchdog (timeout %v): Redis script calls/s", o.s3Watchdog), "calls/s (log, lower is better)", true, gs, short)
			var g2 []group
			g := group{label: fmt.Sprintf("%s waiters on %s locks", commas(int64(o.s4Locks*o.s4Per)), commas(int64(o.s4Locks)))}
			for _, c := range r.contendersFor("s4") {
				k := key("s4", o.s4Locks, c)
				s := r.med(k, func(x bench.Result) float64 { return x.ThroughS })
				th := r.med(k, func(x bench.Result) float64 { return float64(x.Through) })
				if s.present {
					br := bar{contender: c, v: s.v, ok: s.good()}
					if br.ok && th.v < float64(o.s4Locks*o.s4Per) {
						br.ok, br.failText = false, fmt.Sprintf("%s of %s through", short(th.v), short(float64(o.s4Locks*o.s4Per)))
					}
					g.bars = append(g.bars, br)
				}
			}
			g2 = append(g2, g)
			if o.scenarios["s4"] {
				panel(&b, W/2+5, y, W/2-15, ph, "S4: time for all waiters to get through", "seconds (log, lower is better)", true, g2, func(v float64) string { return short(v) + "s" })
			}
		})
	}
	legendH := 30.0
	H := legendH + float64(len(panels))*(ph+10) + 10
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif">`+"\n", W, H, W, H)
	head := b.String()
	b.Reset()
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	lx := 10.0
	var legend []string
	for _, c := range r.o.contenders {
		legend = append(legend, c)
		if c == "redisson" && o.scenarios["s4"] && o.redissonS4Tuned > 0 {
			legend = append(legend, redissonTuned(o))
		}
	}
	for _, c := range legend {
		fmt.Fprintf(&b, `<rect x="%.0f" y="10" width="12" height="12" fill="%s"/><text x="%.0f" y="21" font-size="12">%s</text>`+"\n", lx, color(c), lx+16, html.EscapeString(shortName(c)))
		lx += 26 + 7*float64(len(shortName(c)))
	}
	for i, p := range panels {
		p(legendH + float64(i)*(ph+10))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="10" fill="#777" text-anchor="end">%s · Redis %s · %s · %s</text>`+"\n", W-10, H-4,
		html.EscapeString(r.env.CPU), html.EscapeString(r.env.Redis), html.EscapeString(r.env.Go), r.env.Date.Format("2006-01-02"))
	b.WriteString("</svg>\n")
	return head + b.String()
}
