<?php
// Uncaught custom exception three frames deep; the message carries a GitHub token.
require __DIR__ . '/src/Billing.php';

handleRequest();
