// Package main deadlocks: the runtime's fatal error and a dump of the blocked goroutines.
package main

import "fmt"

func awaitApproval(jobID string, approvals chan string) string {
	fmt.Println("waiting for approval job=" + jobID + " request_id=req_2b7c44")
	return <-approvals
}

func main() {
	approvals := make(chan string)
	awaitApproval("job-5521", approvals)
}
