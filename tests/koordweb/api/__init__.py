"""Tests of the REST API (koordweb/api), its services and selectors."""
