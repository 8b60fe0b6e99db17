// Package main dereferences a nil pointer: a runtime error with a SIGSEGV line.
package main

import "fmt"

type Ledger struct{ Balance int }

type Account struct {
	ID     string
	Ledger *Ledger
}

func applyRefund(acct *Account, cents int) {
	acct.Ledger.Balance -= cents
}

func refundOrder(orderID string) {
	acct := &Account{ID: "acct_" + orderID}
	fmt.Println("refund start order=" + orderID + " request_id=req_77b1e0")
	applyRefund(acct, 4200)
}

func main() {
	refundOrder("ORD-55102")
}
