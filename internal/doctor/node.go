package doctor

import (
	"fmt"
	"time"
)

// nodeEOL is the day each Node release line reaches its end of life, as
// nodejs.org's release schedule gives it: after it, no security fixes.
// Even majors are LTS lines (30 months); odd ones live six months.
var nodeEOL = map[int]string{
	18: "2025-04-30", 19: "2023-06-01", 20: "2026-04-30", 21: "2024-06-01",
	22: "2027-04-30", 23: "2025-06-01", 24: "2028-04-30", 25: "2026-06-01",
	26: "2029-04-30",
}

// nodePastEOL says, for node major at now, when its line's life ended;
// "" while it is maintained (or not in the table: newer than this build).
func nodePastEOL(major int, now time.Time) string {
	day, ok := nodeEOL[major]
	if !ok {
		return ""
	}
	end, err := time.Parse(time.DateOnly, day)
	if err != nil || now.Before(end.AddDate(0, 0, 1)) {
		return ""
	}
	return day
}

// nodeFix is how the owner gets a supported node.
func nodeFix() string {
	return fmt.Sprintf("run 'make build' in the checkout (it leaves node %d or later at bin/node: the machine's own when new enough, else an LTS from npm), or install a current LTS from https://nodejs.org", MinNode)
}
