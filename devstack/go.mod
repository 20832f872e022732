module github.com/partnerpay/api/devstack

go 1.26.0

require github.com/alicebob/miniredis/v2 v2.40.0

require github.com/yuin/gopher-lua v1.1.1 // indirect

require github.com/partnerpay/api/pkg v0.0.0

replace github.com/partnerpay/api/pkg => ../pkg
