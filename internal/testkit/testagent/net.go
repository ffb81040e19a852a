package main

import (
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// curl gets url through $HTTP_PROXY whatever its host, as curl does (Go's
// own client never proxies the loopback).
func curl(u string) string {
	proxy, err := url.Parse(os.Getenv("HTTP_PROXY"))
	if err != nil || proxy.Host == "" {
		return "refused (no HTTP_PROXY)"
	}
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	resp, err := c.Post(u, "application/json", strings.NewReader(`{"model":"x","max_tokens":1,"messages":[]}`))
	if err != nil {
		return "refused (" + err.Error() + ")"
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusForbidden {
		return "refused (" + resp.Status + ")"
	}
	return resp.Status
}

// fetch GETs url as a tool would: through the proxy the environment names.
func fetch(url string) string {
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}
	resp, err := c.Get(url)
	if err != nil {
		return "refused (" + err.Error() + ")"
	}
	resp.Body.Close()
	return resp.Status
}
