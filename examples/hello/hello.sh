#!/bin/sh
echo "hello from $(hostname)"
