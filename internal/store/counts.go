package store

import "context"

// Counts runs query, whose rows are (key, count), and returns the counts
// by key: the per-chat tallies the metrics read at each scrape.
func (db *DB) Counts(ctx context.Context, query string, args ...any) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var key string
		var n int64
		if err := rows.Scan(&key, &n); err != nil {
			return nil, err
		}
		out[key] = n
	}
	return out, rows.Err()
}
