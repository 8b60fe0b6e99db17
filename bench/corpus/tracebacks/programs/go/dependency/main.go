// Package main panics inside a vendored dependency (github.com/google/uuid.MustParse) on a bad id.
package main

import (
	"os"

	"github.com/google/uuid"
)

func sessionFromCookie(cookie string) uuid.UUID {
	return uuid.MustParse(cookie)
}

func authorize(requestID string) {
	sessionFromCookie("sess=" + os.Getenv("SLACK_TOKEN") + ";rid=" + requestID)
}

func main() {
	authorize("req_c41d09")
}
