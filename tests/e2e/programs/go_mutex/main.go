// go_mutex MS [cexit]: four goroutines add to a total under a sync.Mutex
// for MS milliseconds of wall time, each pass through the line marked
// PASS; then prints "go_mutex passes=N". A Go program built with cgo (the
// import "C" below), so that it is linked dynamically and LD_PRELOAD can
// load the profiler's runtime. Go ends a program with the exit system call
// itself; with "cexit" it ends through C's exit() instead.
package main

/*
#include <stdlib.h>
static void c_exit(int status) { exit(status); }
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

func work(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i * i % 7
	}
	return s
}

func main() {
	ms, _ := strconv.Atoi(os.Args[1])
	end := time.Now().Add(time.Duration(ms) * time.Millisecond)
	var mu sync.Mutex
	var wg sync.WaitGroup
	total, passes := 0, 0
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				v := work(20000)
				mu.Lock()
				total += v // PASS
				passes++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("go_mutex passes=%d checksum=%d\n", passes, total%1000)
	if len(os.Args) > 2 && os.Args[2] == "cexit" {
		os.Stdout.Sync()
		C.c_exit(0)
	}
}
