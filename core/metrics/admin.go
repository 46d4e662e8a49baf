package metrics

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// adminBuckets are the bucket bounds, in seconds, of the admin API's
// request durations: a status read (milliseconds) to a failover that
// waits for its catch-up (minutes).
var adminBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600}

// AdminRequests returns the function the admin API calls once per request
// it answered (core/admin's Options.Observe), which records:
//
//	kmirror_admin_requests_total{route,code}            counter
//	kmirror_admin_request_duration_seconds{route}       histogram
//
// route is the API's route pattern ("POST /v1/mirrors/{mirror}/pause"),
// never the path, so that mirror names do not multiply the series;
// "unmatched" for a request no route matches. code is the HTTP status.
func (p *Provider) AdminRequests() (func(route string, code int, took time.Duration), error) {
	m := p.Meter("github.com/kmirror/kmirror/core/metrics/admin")
	requests, err := m.Int64Counter("admin.requests", metric.WithDescription("Admin API requests answered, by route pattern and HTTP status code."))
	if err != nil {
		return nil, err
	}
	took, err := m.Float64Histogram("admin.request.duration", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(adminBuckets...),
		metric.WithDescription("Time the admin API took to answer a request, by route pattern (an operation waits for its outcome: a failover for its catch-up)."))
	if err != nil {
		return nil, err
	}
	return func(route string, code int, d time.Duration) {
		if route == "" {
			route = "unmatched"
		}
		r := attribute.String("route", route)
		ctx := context.Background()
		requests.Add(ctx, 1, metric.WithAttributes(r, attribute.String("code", strconv.Itoa(code))))
		took.Record(ctx, d.Seconds(), metric.WithAttributes(r))
	}, nil
}
