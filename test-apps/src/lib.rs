//! test-apps: see tests/
