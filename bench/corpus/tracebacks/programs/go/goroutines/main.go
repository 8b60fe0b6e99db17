// Package main panics in a worker goroutine while others block: GOTRACEBACK=all prints every goroutine.
package main

import (
	"fmt"
	"os"
	"sync"
)

func syncInvoice(id int, dsn string) {
	if id == 3 {
		panic(fmt.Sprintf("invoice %d sync failed against %s (E2203)", id, dsn))
	}
	select {}
}

func startWorkers(n int, wg *sync.WaitGroup) {
	dsn := os.Getenv("DB_DSN")
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			syncInvoice(id, dsn)
		}(i)
	}
}

func main() {
	var wg sync.WaitGroup
	done := make(chan struct{})
	startWorkers(3, &wg)
	<-done
}
