module github.com/kmirror/kmirror/sdk

go 1.26
