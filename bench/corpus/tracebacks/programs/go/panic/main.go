// Package main panics with an error value whose message carries a GitHub token.
package main

import (
	"fmt"
	"os"
)

func chargeCard(orderID string, amountCents int) {
	token := os.Getenv("GH_TOKEN")
	panic(fmt.Errorf("card declined for order %s code=E1042 amount=%d token=%s", orderID, amountCents, token))
}

func loadOrder(orderID string) {
	chargeCard(orderID, 4200)
}

func handleRequest() {
	loadOrder("ORD-40917")
}

func main() {
	handleRequest()
}
